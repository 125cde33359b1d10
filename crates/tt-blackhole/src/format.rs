//! Tenstorrent data formats and the tile sizes this crate produces.

use serde::{Deserialize, Serialize};

/// Elements per 32x32 tile.
pub const TILE_ELEMS: usize = 1024;
/// Tile edge.
pub const TILE_DIM: usize = 32;
/// Face edge: a tile is four 16x16 faces.
pub const FACE_DIM: usize = 16;
/// Shared-exponent groups per tile (4 faces x 16 rows), one exponent byte each.
pub const GROUPS_PER_TILE: usize = 64;

/// The subset of tt-metal's `tt::DataFormat` this crate handles. The discriminants are the
/// tt-metal enum values (`tt_backend_api_types.hpp`), so they can go into runtime args as-is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum DataFormat {
    /// IEEE f32, 4096-byte tiles.
    Float32 = 0,
    /// bfloat16 (tt-metal calls it `Float16_b`).
    Float16B = 5,
    /// Block-float, 8-bit codes sharing one exponent per 16 values (1088-byte tiles).
    Bfp8B = 6,
    /// Block-float, 4-bit codes sharing one exponent per 16 values (576-byte tiles).
    Bfp4B = 7,
}

impl DataFormat {
    /// Bytes of one 32x32 tile (`Tile::get_tile_size` on Blackhole: the 64 exponent bytes are
    /// already a multiple of the 16 B L1 alignment).
    pub const fn tile_bytes(self) -> usize {
        match self {
            DataFormat::Float32 => 4096,
            DataFormat::Float16B => 2048,
            DataFormat::Bfp8B => GROUPS_PER_TILE + TILE_ELEMS,
            DataFormat::Bfp4B => GROUPS_PER_TILE + TILE_ELEMS / 2,
        }
    }

    /// The name ttnn uses (`ttnn.bfloat8_b`, …) and `GR00T_MK_ARENA_DTYPE` accepts.
    pub const fn name(self) -> &'static str {
        match self {
            DataFormat::Float32 => "float32",
            DataFormat::Float16B => "bf16",
            DataFormat::Bfp8B => "bfp8_b",
            DataFormat::Bfp4B => "bfp4_b",
        }
    }
}

impl std::fmt::Display for DataFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The storage format of the DiT weight arena (`GR00T_MK_ARENA_DTYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArenaDtype {
    /// bfp8_b tiles (the default; `auto` resolves here).
    Bfp8B,
    /// bfp4_b tiles: half the bytes of bfp8_b, coarser weights.
    Bfp4B,
    /// Plain bfloat16 tiles (tt-metal `Float16_b`), about twice the bytes of bfp8_b.
    Bf16,
}

/// `GR00T_MK_ARENA_DTYPE` held a value this crate does not know.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown arena dtype {0:?}: expected one of bfp8_b, bfp4_b, bf16")]
pub struct UnknownDtype(pub String);

impl ArenaDtype {
    /// Name of the environment variable that selects the arena dtype.
    pub const ENV: &'static str = "GR00T_MK_ARENA_DTYPE";

    /// The tt-metal tile format the arena is stored in.
    pub const fn format(self) -> DataFormat {
        match self {
            ArenaDtype::Bfp8B => DataFormat::Bfp8B,
            ArenaDtype::Bfp4B => DataFormat::Bfp4B,
            ArenaDtype::Bf16 => DataFormat::Float16B,
        }
    }

    /// Canonical name (`bfp8_b`, `bfp4_b`, `bf16`), used in cache file names and reports.
    pub const fn name(self) -> &'static str {
        self.format().name()
    }

    /// Parse a `GR00T_MK_ARENA_DTYPE` value (case-insensitive; `bfloat8_b`-style aliases too).
    /// `auto` (the seed manifest's default) picks bfp8_b, the format the megakernel is sized for.
    pub fn parse(value: &str) -> Result<Self, UnknownDtype> {
        match value.trim().to_ascii_lowercase().as_str() {
            "auto" | "bfp8_b" | "bfloat8_b" | "bfp8" => Ok(ArenaDtype::Bfp8B),
            "bfp4_b" | "bfloat4_b" | "bfp4" => Ok(ArenaDtype::Bfp4B),
            "bf16" | "bfloat16" | "float16_b" => Ok(ArenaDtype::Bf16),
            _ => Err(UnknownDtype(value.to_string())),
        }
    }

    /// The default when the variable is unset is bfp8_b (the 0.98 GB arena).
    pub fn from_env_value(value: Option<&str>) -> Result<Self, UnknownDtype> {
        value.map_or(Ok(ArenaDtype::Bfp8B), Self::parse)
    }
}

impl std::fmt::Display for ArenaDtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tile_sizes_match_tt_metal() {
        assert_eq!(DataFormat::Bfp8B.tile_bytes(), 1088);
        assert_eq!(DataFormat::Bfp4B.tile_bytes(), 576);
        assert_eq!(DataFormat::Float16B.tile_bytes(), 2048);
        assert_eq!(DataFormat::Float32.tile_bytes(), 4096);
        assert_eq!(DataFormat::Bfp8B as u8, 6);
        assert_eq!(DataFormat::Bfp4B as u8, 7);
        assert_eq!(DataFormat::Float16B as u8, 5);
    }

    #[test]
    fn dtype_parse() {
        assert_eq!(ArenaDtype::parse("BFP4_B"), Ok(ArenaDtype::Bfp4B));
        assert_eq!(ArenaDtype::from_env_value(None), Ok(ArenaDtype::Bfp8B));
        assert_eq!(
            ArenaDtype::parse("bf16").unwrap().format(),
            DataFormat::Float16B
        );
        let err = ArenaDtype::parse("fp8").unwrap_err();
        assert!(err.to_string().contains("bfp8_b, bfp4_b, bf16"));
    }
}
