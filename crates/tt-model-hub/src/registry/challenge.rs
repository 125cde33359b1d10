//! The `WWW-Authenticate` challenge a registry answers 401 with: `Basic realm="…"`, or
//! `Bearer realm="<token url>",service="…",scope="…"` (the token flow of the distribution
//! spec: ask the realm for a token with the scopes needed, then send it as a Bearer header).

/// What a registry asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    /// Send the credentials as `Authorization: Basic`.
    Basic,
    /// Get a token from `realm` (with `service` and the scopes), send it as Bearer.
    Bearer {
        /// The token endpoint URL (the challenge's `realm`).
        realm: String,
        /// The `service` parameter to pass to the token endpoint; `None` when the challenge has
        /// none.
        service: Option<String>,
    },
}

/// Parses one challenge (the first scheme the header names); `None` when unknown (pure).
pub fn parse(header: &str) -> Option<Challenge> {
    let header = header.trim();
    let (scheme, params) = header.split_once(' ').unwrap_or((header, ""));
    match scheme.to_ascii_lowercase().as_str() {
        "basic" => Some(Challenge::Basic),
        "bearer" => {
            let mut realm = None;
            let mut service = None;
            for (k, v) in params_of(params) {
                match k.to_ascii_lowercase().as_str() {
                    "realm" => realm = Some(v),
                    "service" => service = Some(v),
                    _ => {}
                }
            }
            Some(Challenge::Bearer {
                realm: realm?,
                service,
            })
        }
        _ => None,
    }
}

/// `k="v",k2=v2` → pairs; commas inside quotes (a scope list) stay in the value.
fn params_of(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = s.trim();
    while let Some((k, after)) = rest.split_once('=') {
        let key = k.trim().trim_start_matches(',').trim().to_string();
        let after = after.trim_start();
        let (value, next) = if let Some(q) = after.strip_prefix('"') {
            let end = q.find('"').unwrap_or(q.len());
            (q[..end].to_string(), q.get(end + 1..).unwrap_or(""))
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim().to_string(), &after[end..])
        };
        out.push((key, value));
        rest = next.trim_start().trim_start_matches(',').trim_start();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_and_bearer_challenges() {
        assert_eq!(
            parse(r#"Basic realm="tt-model-test""#),
            Some(Challenge::Basic)
        );
        assert_eq!(
            parse(
                r#"Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:acme/x:pull,push""#
            ),
            Some(Challenge::Bearer {
                realm: "https://ghcr.io/token".into(),
                service: Some("ghcr.io".into())
            })
        );
        assert_eq!(
            parse("bearer realm=https://auth.example/token"),
            Some(Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: None
            })
        );
        assert_eq!(
            parse("Bearer service=\"x\""),
            None,
            "a Bearer challenge needs a realm"
        );
        assert_eq!(parse("Negotiate"), None);
    }
}
