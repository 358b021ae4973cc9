//! Usernames and passwords: the username grammar, the password policy, Argon2id hashes in
//! PHC strings (`$argon2id$v=19$m=…,t=…,p=…$salt$hash`), verified in constant time.

use argon2::{Algorithm, Argon2, Params, Version};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD_NO_PAD;
use rand::RngCore as _;
use subtle::ConstantTimeEq as _;

use crate::{ErrorKind, StoreError};

/// Shorter passwords are refused when set.
pub const MIN_PASSWORD_LENGTH: usize = 12;
/// Longer ones are refused at login before any hashing (a cheap denial of service).
pub const MAX_PASSWORD_LENGTH: usize = 1024;

/// The parameters new hashes get (OWASP's Argon2id baseline: 19 MiB, 2 passes).
const MEMORY_KIB: u32 = 19_456;
const PASSES: u32 = 2;
const LANES: u32 = 1;
const OUTPUT: usize = 32;

/// `name` trimmed and in lower case, when it fits the grammar: a letter or digit, then up
/// to 127 of letters, digits and `._@+-`.
#[must_use]
pub fn canonical_username(name: &str) -> Option<String> {
    let canonical = name.trim().to_lowercase();
    let mut chars = canonical.chars();
    let first = chars.next()?;
    let valid = (first.is_ascii_lowercase() || first.is_ascii_digit())
        && canonical.len() <= 128
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._@+-".contains(c));
    valid.then_some(canonical)
}

/// The canonical form of `name`, or why not.
pub(crate) fn username(name: &str) -> Result<String, StoreError> {
    canonical_username(name).ok_or_else(|| {
        StoreError::new(
            ErrorKind::Validation,
            format!(
                "'{}' is not a valid username: start with a letter or digit, then up to 127 letters, digits or ._@+-",
                name.trim()
            ),
        )
    })
}

/// Refuses a password the policy does not allow.
pub(crate) fn check_policy(password: &str) -> Result<(), StoreError> {
    let length = password.chars().count();
    if length < MIN_PASSWORD_LENGTH {
        return Err(StoreError::new(
            ErrorKind::Validation,
            format!("Password must be at least {MIN_PASSWORD_LENGTH} characters"),
        ));
    }
    if length > MAX_PASSWORD_LENGTH {
        return Err(StoreError::new(
            ErrorKind::Validation,
            format!("Password must be at most {MAX_PASSWORD_LENGTH} characters"),
        ));
    }
    Ok(())
}

fn hasher(memory: u32, passes: u32, lanes: u32, output: usize) -> Option<Argon2<'static>> {
    let params = Params::new(memory, passes, lanes, Some(output)).ok()?;
    Some(Argon2::new(Algorithm::Argon2id, Version::V0x13, params))
}

/// A new PHC string for `password` with a fresh 16-byte salt.
pub(crate) fn hash(password: &str) -> Result<String, StoreError> {
    let mut salt = [0_u8; 16];
    rand::rng().fill_bytes(&mut salt);
    let mut out = [0_u8; OUTPUT];
    hasher(MEMORY_KIB, PASSES, LANES, OUTPUT)
        .ok_or_else(|| StoreError::new(ErrorKind::Validation, "invalid Argon2 parameters"))?
        .hash_password_into(password.as_bytes(), &salt, &mut out)
        .map_err(|e| StoreError::new(ErrorKind::Validation, format!("cannot hash: {e}")))?;
    Ok(format!(
        "$argon2id$v=19$m={MEMORY_KIB},t={PASSES},p={LANES}${}${}",
        STANDARD_NO_PAD.encode(salt),
        STANDARD_NO_PAD.encode(out)
    ))
}

/// A parsed PHC string.
struct Phc {
    memory: u32,
    passes: u32,
    lanes: u32,
    salt: Vec<u8>,
    hash: Vec<u8>,
}

fn parse(phc: &str) -> Option<Phc> {
    let mut parts = phc.split('$');
    let (empty, algorithm, version, params, salt, hash) = (
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
    );
    if !empty.is_empty() || algorithm != "argon2id" || version != "v=19" || parts.next().is_some() {
        return None;
    }
    let mut values = [None; 3];
    for pair in params.split(',') {
        let (key, value) = pair.split_once('=')?;
        let index = ["m", "t", "p"].iter().position(|k| *k == key)?;
        values[index] = Some(value.parse::<u32>().ok()?);
    }
    Some(Phc {
        memory: values[0]?,
        passes: values[1]?,
        lanes: values[2]?,
        salt: STANDARD_NO_PAD.decode(salt).ok()?,
        hash: STANDARD_NO_PAD.decode(hash).ok()?,
    })
}

/// Whether `password` matches `phc`, compared in constant time. A malformed hash matches
/// nothing.
pub(crate) fn verify(password: &str, phc: &str) -> bool {
    let Some(stored) = parse(phc) else {
        return false;
    };
    let Some(argon) = hasher(
        stored.memory,
        stored.passes,
        stored.lanes,
        stored.hash.len(),
    ) else {
        return false;
    };
    let mut out = vec![0_u8; stored.hash.len()];
    if argon
        .hash_password_into(password.as_bytes(), &stored.salt, &mut out)
        .is_err()
    {
        return false;
    }
    out.ct_eq(&stored.hash).into()
}

/// Whether `phc` was made with other parameters than new hashes get (re-hash at login).
pub(crate) fn outdated(phc: &str) -> bool {
    parse(phc).is_none_or(|p| {
        (p.memory, p.passes, p.lanes, p.hash.len()) != (MEMORY_KIB, PASSES, LANES, OUTPUT)
    })
}

/// A hash of nothing anyone knows: verified when a user does not exist, so a login takes
/// as long whether the name exists or not.
pub(crate) fn dummy() -> &'static str {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DUMMY.get_or_init(|| {
        hash(&uuid::Uuid::new_v4().to_string()).unwrap_or_else(|_| {
            format!(
                "$argon2id$v=19$m={MEMORY_KIB},t={PASSES},p={LANES}$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usernames_are_trimmed_lower_cased_and_checked() {
        assert_eq!(canonical_username("  Alice "), Some("alice".into()));
        assert_eq!(
            canonical_username("ops.bot+ci@example-1"),
            Some("ops.bot+ci@example-1".into())
        );
        for bad in ["", "   ", ".alice", "al ice", "al/ice", "ålice"] {
            assert_eq!(canonical_username(bad), None, "{bad:?}");
        }
        assert!(canonical_username(&"a".repeat(128)).is_some());
        assert!(canonical_username(&"a".repeat(129)).is_none());
    }

    #[test]
    fn the_policy_wants_twelve_characters() {
        assert!(check_policy("eleven-char").is_err());
        assert!(check_policy("twelve-chars").is_ok());
        assert!(check_policy(&"x".repeat(1025)).is_err());
    }

    #[test]
    fn hashes_verify_their_password_only_and_carry_their_parameters() {
        let phc = hash("correct horse battery").expect("hash");
        assert!(phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{phc}");
        assert!(verify("correct horse battery", &phc));
        assert!(!verify("correct horse batterY", &phc));
        assert!(!verify("correct horse battery", "not a hash"));
        assert!(!outdated(&phc));
        // Same password, another salt.
        assert_ne!(phc, hash("correct horse battery").expect("hash"));
        let weaker = phc.replace("m=19456,t=2", "m=8192,t=1");
        assert!(outdated(&weaker));
        assert!(!verify("anything at all", dummy()));
    }
}
