//! End-effector poses for relative actions, in float64 as the reference's numpy/scipy code:
//! `T_abs = T_ref @ T_rel` with rotations in rot6d (the first two ROWS of the matrix,
//! Gram-Schmidt on the way in) or rotation vectors.
//!
//! The reference keeps rotations as `scipy.spatial.transform.Rotation`, i.e. as unit
//! quaternions: every matrix it builds goes matrix -> quaternion -> matrix. The same round
//! trip is done here so the outputs follow the same path (it only moves values by ~1e-16,
//! but it is also what makes a slightly non-orthonormal input come out orthonormal).

/// A 3x3 matrix, row-major.
pub type Mat3 = [[f64; 3]; 3];

/// A rigid transform: rotation `r` and translation `t` (`x -> r x + t`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pose {
    /// Rotation matrix.
    pub r: Mat3,
    /// Translation.
    pub t: [f64; 3],
}

fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

fn norm(a: [f64; 3]) -> f64 {
    dot(a, a).sqrt()
}

fn scale(a: [f64; 3], s: f64) -> [f64; 3] {
    [a[0] * s, a[1] * s, a[2] * s]
}

fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

/// Unit quaternion `[x, y, z, w]` of a rotation matrix (scipy `Rotation.from_matrix`: the
/// largest of the diagonal and the trace picks the stable formula).
pub fn matrix_to_quat(m: &Mat3) -> [f64; 4] {
    let tr = m[0][0] + m[1][1] + m[2][2];
    let decision = [m[0][0], m[1][1], m[2][2], tr];
    let mut choice = 0;
    for (i, &d) in decision.iter().enumerate() {
        if d > decision[choice] {
            choice = i;
        }
    }
    let mut q = [0.0; 4];
    if choice != 3 {
        let i = choice;
        let j = (i + 1) % 3;
        let k = (j + 1) % 3;
        q[i] = 1.0 - tr + 2.0 * m[i][i];
        q[j] = m[j][i] + m[i][j];
        q[k] = m[k][i] + m[i][k];
        q[3] = m[k][j] - m[j][k];
    } else {
        q[0] = m[2][1] - m[1][2];
        q[1] = m[0][2] - m[2][0];
        q[2] = m[1][0] - m[0][1];
        q[3] = 1.0 + tr;
    }
    let n = (q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]).sqrt();
    [q[0] / n, q[1] / n, q[2] / n, q[3] / n]
}

/// Rotation matrix of a unit quaternion `[x, y, z, w]` (scipy `Rotation.as_matrix`).
pub fn quat_to_matrix(q: [f64; 4]) -> Mat3 {
    let [x, y, z, w] = q;
    let (x2, y2, z2, w2) = (x * x, y * y, z * z, w * w);
    let (xy, zw, xz, yw, yz, xw) = (x * y, z * w, x * z, y * w, y * z, x * w);
    [
        [x2 - y2 - z2 + w2, 2.0 * (xy - zw), 2.0 * (xz + yw)],
        [2.0 * (xy + zw), -x2 + y2 - z2 + w2, 2.0 * (yz - xw)],
        [2.0 * (xz - yw), 2.0 * (yz + xw), -x2 - y2 + z2 + w2],
    ]
}

/// The matrix as the reference stores it: through a quaternion and back.
fn via_quat(m: &Mat3) -> Mat3 {
    quat_to_matrix(matrix_to_quat(m))
}

/// `EndEffectorPose._rot6d_to_matrix`: rows 1 and 2 from the 6 values, Gram-Schmidt, row 3 =
/// row 1 x row 2.
pub fn rot6d_to_matrix(v: &[f64; 6]) -> Mat3 {
    let a = [v[0], v[1], v[2]];
    let b = [v[3], v[4], v[5]];
    let r1 = scale(a, 1.0 / norm(a));
    let d = dot(r1, b);
    let b = [b[0] - d * r1[0], b[1] - d * r1[1], b[2] - d * r1[2]];
    let r2 = scale(b, 1.0 / norm(b));
    [r1, r2, cross(r1, r2)]
}

/// The first two rows of `m`, flattened.
pub fn matrix_to_rot6d(m: &Mat3) -> [f64; 6] {
    [m[0][0], m[0][1], m[0][2], m[1][0], m[1][1], m[1][2]]
}

/// scipy `Rotation.from_rotvec`.
pub fn rotvec_to_quat(v: [f64; 3]) -> [f64; 4] {
    let angle = norm(v);
    // Taylor terms below 1e-3 rad, as scipy does, to keep sin(a/2)/a accurate.
    let s = if angle <= 1e-3 {
        let a2 = angle * angle;
        0.5 - a2 / 48.0 + a2 * a2 / 3840.0
    } else {
        (angle / 2.0).sin() / angle
    };
    [v[0] * s, v[1] * s, v[2] * s, (angle / 2.0).cos()]
}

/// scipy `Rotation.as_rotvec` (the quaternion with `w >= 0`, angle in [0, pi]).
pub fn quat_to_rotvec(q: [f64; 4]) -> [f64; 3] {
    let q = if q[3] < 0.0 {
        [-q[0], -q[1], -q[2], -q[3]]
    } else {
        q
    };
    let v = [q[0], q[1], q[2]];
    let angle = 2.0 * norm(v).atan2(q[3]);
    let s = if angle <= 1e-3 {
        let a2 = angle * angle;
        2.0 + a2 / 12.0 + 7.0 * a2 * a2 / 2880.0
    } else {
        angle / (angle / 2.0).sin()
    };
    scale(v, s)
}

fn matmul(a: &Mat3, b: &Mat3) -> Mat3 {
    let mut c = [[0.0; 3]; 3];
    for (i, row) in c.iter_mut().enumerate() {
        for (j, x) in row.iter_mut().enumerate() {
            *x = a[i][0] * b[0][j] + a[i][1] * b[1][j] + a[i][2] * b[2][j];
        }
    }
    c
}

fn matvec(a: &Mat3, v: [f64; 3]) -> [f64; 3] {
    [dot(a[0], v), dot(a[1], v), dot(a[2], v)]
}

impl Pose {
    /// From xyz + rot6d (9 values).
    pub fn from_xyz_rot6d(v: &[f64]) -> Self {
        let r6 = [v[3], v[4], v[5], v[6], v[7], v[8]];
        Self {
            r: via_quat(&rot6d_to_matrix(&r6)),
            t: [v[0], v[1], v[2]],
        }
    }

    /// From xyz + rotation vector (6 values).
    pub fn from_xyz_rotvec(v: &[f64]) -> Self {
        Self {
            r: quat_to_matrix(rotvec_to_quat([v[3], v[4], v[5]])),
            t: [v[0], v[1], v[2]],
        }
    }

    /// `self @ rel` as homogeneous matrices (`to_absolute_chunking`).
    pub fn compose(&self, rel: &Pose) -> Pose {
        let t = matvec(&self.r, rel.t);
        Pose {
            r: via_quat(&matmul(&self.r, &rel.r)),
            t: [t[0] + self.t[0], t[1] + self.t[1], t[2] + self.t[2]],
        }
    }

    /// xyz + rot6d.
    pub fn to_xyz_rot6d(&self) -> [f64; 9] {
        let r = matrix_to_rot6d(&self.r);
        [
            self.t[0], self.t[1], self.t[2], r[0], r[1], r[2], r[3], r[4], r[5],
        ]
    }

    /// xyz + rotation vector.
    pub fn to_xyz_rotvec(&self) -> [f64; 6] {
        let v = quat_to_rotvec(matrix_to_quat(&self.r));
        [self.t[0], self.t[1], self.t[2], v[0], v[1], v[2]]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::f64::consts::{FRAC_PI_2, FRAC_PI_4, PI};

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12)
    }

    #[test]
    fn rot6d_gram_schmidt_normalises_and_orthogonalises() {
        // Row 1 scaled by 2, row 2 with a component along row 1: Rz(90deg) comes back.
        let m = rot6d_to_matrix(&[0.0, -2.0, 0.0, 1.0, 0.5, 0.0]);
        let want = [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]];
        assert!(close(m.as_flattened(), want.as_flattened()), "{m:?}");
    }

    #[test]
    fn rot6d_composition_by_hand() {
        // Reference: at (1, 2, 3) rotated 90deg about z (rows (0,-1,0), (1,0,0)).
        let reference = Pose::from_xyz_rot6d(&[1.0, 2.0, 3.0, 0.0, -1.0, 0.0, 1.0, 0.0, 0.0]);
        // Relative: 1 along the reference's x, a further 90deg about z.
        let rel = Pose::from_xyz_rot6d(&[1.0, 0.0, 0.0, 0.0, -1.0, 0.0, 1.0, 0.0, 0.0]);
        let abs = reference.compose(&rel).to_xyz_rot6d();
        // x of the reference is world +y; Rz(180deg) has rows (-1,0,0), (0,-1,0).
        assert!(
            close(&abs, &[1.0, 3.0, 3.0, -1.0, 0.0, 0.0, 0.0, -1.0, 0.0]),
            "{abs:?}"
        );
        // The identity relative pose gives the reference back.
        let id = Pose::from_xyz_rot6d(&[0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0]);
        let same = reference.compose(&id).to_xyz_rot6d();
        assert!(close(
            &same,
            &[1.0, 2.0, 3.0, 0.0, -1.0, 0.0, 1.0, 0.0, 0.0]
        ));
    }

    #[test]
    fn rotvec_composition_by_hand() {
        let reference = Pose::from_xyz_rotvec(&[1.0, 2.0, 3.0, 0.0, 0.0, FRAC_PI_2]);
        let rel = Pose::from_xyz_rotvec(&[1.0, 0.0, 0.0, 0.0, 0.0, FRAC_PI_4]);
        let abs = reference.compose(&rel).to_xyz_rotvec();
        assert!(
            close(&abs, &[1.0, 3.0, 3.0, 0.0, 0.0, 3.0 * FRAC_PI_4]),
            "{abs:?}"
        );
        // About another axis: Rx(90deg) then a relative Ry(90deg) (applied in the rotated
        // frame) = Rx(90) Ry(90), whose rotation vector is (1,1,1) * (2pi/3)/sqrt(3).
        let a = Pose::from_xyz_rotvec(&[0.0, 0.0, 0.0, FRAC_PI_2, 0.0, 0.0]);
        let b = Pose::from_xyz_rotvec(&[0.0, 0.0, 1.0, 0.0, FRAC_PI_2, 0.0]);
        let c = a.compose(&b).to_xyz_rotvec();
        let k = 2.0 * PI / 3.0 / 3f64.sqrt();
        // Rx(90) maps the relative z translation onto world -y.
        assert!(close(&c, &[0.0, -1.0, 0.0, k, k, k]), "{c:?}");
    }

    #[test]
    fn rotvec_round_trips_small_and_large_angles() {
        for v in [
            [1e-5, -2e-5, 3e-6],
            [0.3, -0.2, 0.1],
            [0.0, 3.0, 0.0],
            [-1.0, 1.0, 2.0],
        ] {
            let back = quat_to_rotvec(matrix_to_quat(&quat_to_matrix(rotvec_to_quat(v))));
            assert!(close(&back, &v), "{v:?} -> {back:?}");
        }
    }
}
