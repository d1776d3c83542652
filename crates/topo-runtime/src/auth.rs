//! Proof of the job token without sending it: HMAC-SHA-256 (FIPS 180-4, RFC 2104) over both
//! sides' nonces. Whoever listens at a rendezvous address, or connects to one, learns a MAC
//! bound to nonces it cannot reuse, never the token.
//!
//! Written here rather than taken from a crate: the rendezvous needs only one hash and one
//! MAC (about 80 lines, checked against the FIPS and RFC 4231 vectors below), where `sha2` and
//! `hmac` would add six crates to every build.

use std::io::{Read, Write};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::error::{Result, RuntimeError};
use crate::wire::{Timed, read_frame_by, write_frame};

const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

const H0: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

fn compress(h: &mut [u32; 8], block: &[u8]) {
    let mut w = [0u32; 64];
    for (i, c) in block.chunks_exact(4).enumerate() {
        w[i] = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
    }
    for i in 16..64 {
        let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
        let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16]
            .wrapping_add(s0)
            .wrapping_add(w[i - 7])
            .wrapping_add(s1);
    }
    let mut v = *h;
    for i in 0..64 {
        let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
        let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
        let t1 = v[7]
            .wrapping_add(s1)
            .wrapping_add(ch)
            .wrapping_add(K[i])
            .wrapping_add(w[i]);
        let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
        let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
        let t2 = s0.wrapping_add(maj);
        v.copy_within(0..7, 1);
        v[4] = v[4].wrapping_add(t1);
        v[0] = t1.wrapping_add(t2);
    }
    for (a, b) in h.iter_mut().zip(v) {
        *a = a.wrapping_add(b);
    }
}

/// SHA-256 of the concatenation of `parts`.
pub fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = H0;
    let mut buf = Vec::with_capacity(parts.iter().map(|p| p.len()).sum::<usize>() + 72);
    for p in parts {
        buf.extend_from_slice(p);
    }
    let bits = (buf.len() as u64).wrapping_mul(8);
    buf.push(0x80);
    while buf.len() % 64 != 56 {
        buf.push(0);
    }
    buf.extend_from_slice(&bits.to_be_bytes());
    for block in buf.chunks_exact(64) {
        compress(&mut h, block);
    }
    let mut out = [0u8; 32];
    for (o, x) in out.chunks_exact_mut(4).zip(h) {
        o.copy_from_slice(&x.to_be_bytes());
    }
    out
}

/// HMAC-SHA-256 of the concatenation of `msg` under `key`.
pub fn hmac_sha256(key: &[u8], msg: &[&[u8]]) -> [u8; 32] {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&sha256(&[key]));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let ipad: Vec<u8> = k.iter().map(|b| b ^ 0x36).collect();
    let opad: Vec<u8> = k.iter().map(|b| b ^ 0x5c).collect();
    let mut inner_parts: Vec<&[u8]> = vec![&ipad];
    inner_parts.extend_from_slice(msg);
    let inner = sha256(&inner_parts);
    sha256(&[&opad, &inner])
}

/// Fresh random bytes from the kernel, as hex; an error rather than a guessable value.
pub fn nonce() -> Result<String> {
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| RuntimeError::io("read random bytes from /dev/urandom", e))?;
    Ok(hex(&b))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Which side of a rendezvous a proof is from, so that one side's proof is never accepted
/// as the other's.
#[derive(Debug, Clone, Copy)]
pub enum Side {
    Leader,
    Member,
}

/// The proof that `side` knows `token`, bound to the joining rank, the world size and both
/// nonces (`member` chosen by the joining rank, `leader` by rank 0).
pub fn proof(
    token: &str,
    side: Side,
    rank: usize,
    world: usize,
    member: &str,
    leader: &str,
) -> String {
    let label: &[u8] = match side {
        Side::Leader => b"topo-rendezvous leader\0",
        Side::Member => b"topo-rendezvous member\0",
    };
    let (r, w) = ((rank as u64).to_le_bytes(), (world as u64).to_le_bytes());
    hex(&hmac_sha256(
        token.as_bytes(),
        &[label, &r, &w, member.as_bytes(), b"\0", leader.as_bytes()],
    ))
}

/// Compare two proofs in time independent of where they differ.
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Whether a nonce read from a peer has the shape [`nonce`] gives (so that no separator or
/// length games reach the MAC).
pub fn valid_nonce(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Rank 0's answer to a hello: a refusal (the same frame as the launcher's `Reply::Refused`)
/// or its own nonce and its proof of the token.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Challenge {
    Refused(String),
    Prove { nonce: String, proof: String },
}

/// A joining rank's proof of the token, sent only once rank 0 has proved it.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Answer {
    proof: String,
}

/// Rank 0's half of the handshake with a rank that said hello as `rank` of `world` with
/// nonce `member`: prove the token first, then check the rank's proof. `Err(reason)` when the
/// rank does not know the token or breaks the protocol.
pub(crate) fn lead<S: Timed + Write>(
    s: &mut S,
    token: &str,
    (rank, world): (usize, usize),
    member: &str,
    deadline: Instant,
) -> std::result::Result<(), String> {
    if !valid_nonce(member) {
        return Err(
            "hello without a valid nonce (another program, or another topo version)".into(),
        );
    }
    let mine = nonce().map_err(|e| e.to_string())?;
    let challenge = Challenge::Prove {
        proof: proof(token, Side::Leader, rank, world, member, &mine),
        nonce: mine.clone(),
    };
    write_frame(s, &challenge).map_err(|e| e.to_string())?;
    let a: Answer = read_frame_by(s, deadline, 4096).map_err(|e| e.to_string())?;
    if same(
        &a.proof,
        &proof(token, Side::Member, rank, world, member, &mine),
    ) {
        Ok(())
    } else {
        Err("wrong job token".into())
    }
}

/// A joining rank's half: read rank 0's challenge, check that it knows the token (so that a
/// stranger at the rendezvous address learns nothing it could reuse), then answer. `whom`
/// names the listener in the error.
pub(crate) fn join<S: Timed + Write>(
    s: &mut S,
    token: &str,
    (rank, world): (usize, usize),
    member: &str,
    deadline: Instant,
    whom: &str,
) -> Result<()> {
    let (nonce, theirs) = match read_frame_by(s, deadline, 4096)? {
        Challenge::Refused(why) => {
            return Err(RuntimeError::Rendezvous(format!(
                "rank 0 refused rank {rank}: {why}"
            )));
        }
        Challenge::Prove { nonce, proof } => (nonce, proof),
    };
    let want = proof(token, Side::Leader, rank, world, member, &nonce);
    if !valid_nonce(&nonce) || !same(&theirs, &want) {
        return Err(RuntimeError::Rendezvous(format!(
            "{whom} does not know the job token: it is not this job's rank 0 (another job, or a stranger holding the address), and the token was not sent to it. Set TOPO_JOB_TOKEN to a secret shared by the job's ranks"
        )));
    }
    let mine = proof(token, Side::Member, rank, world, member, &nonce);
    write_frame(s, &Answer { proof: mine })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn sha256_matches_the_fips_180_examples() {
        assert_eq!(
            hex(&sha256(&[b"abc"])),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hex(&sha256(&[b""])),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let two_blocks = b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
        assert_eq!(
            hex(&sha256(&[&two_blocks[..10], &two_blocks[10..]])),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        let million = vec![b'a'; 1_000_000];
        assert_eq!(
            hex(&sha256(&[&million])),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        );
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test cases 1, 2, 4 and 6 (6: a key longer than the block).
        let cases: [(Vec<u8>, Vec<u8>, &str); 4] = [
            (
                vec![0x0b; 20],
                b"Hi There".to_vec(),
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
            ),
            (
                b"Jefe".to_vec(),
                b"what do ya want for nothing?".to_vec(),
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
            ),
            (
                unhex("0102030405060708090a0b0c0d0e0f10111213141516171819"),
                vec![0xcd; 50],
                "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b",
            ),
            (
                vec![0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First".to_vec(),
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
            ),
        ];
        for (key, msg, want) in cases {
            assert_eq!(hex(&hmac_sha256(&key, &[&msg])), want);
        }
    }

    #[test]
    fn a_proof_is_bound_to_its_side_rank_and_nonces() {
        let p = proof("t", Side::Member, 1, 2, "a", "b");
        assert!(same(&p, &proof("t", Side::Member, 1, 2, "a", "b")));
        assert!(!same(&p, &proof("t", Side::Leader, 1, 2, "a", "b")));
        assert!(!same(&p, &proof("t", Side::Member, 2, 3, "a", "b")));
        assert!(!same(&p, &proof("t", Side::Member, 1, 2, "a", "c")));
        assert!(!same(&p, &proof("u", Side::Member, 1, 2, "a", "b")));
        // The separator keeps ("ab", "c") and ("a", "bc") apart.
        assert!(!same(
            &proof("t", Side::Member, 1, 2, "ab", "c"),
            &proof("t", Side::Member, 1, 2, "a", "bc")
        ));
        assert!(!same(&p, &p[1..]));
    }

    #[test]
    fn nonces_differ() {
        let (a, b) = (nonce().unwrap(), nonce().unwrap());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}
