//! ClickHouse's native compressed blocks (`compress=1` / `decompress=1`), written here
//! independently of the server so the tests check the server against the format, not
//! against itself.

const METHOD_LZ4: u8 = 0x82;
const HEADER: usize = 9;

/// ClickHouse stores CityHash128 v1.0.2 as its two 64-bit halves, low half first.
fn checksum(block: &[u8]) -> [u8; 16] {
    cityhash_rs::cityhash_102_128(block)
        .rotate_right(64)
        .to_le_bytes()
}

pub(crate) fn compress(data: &[u8]) -> Vec<u8> {
    let payload = lz4_flex::block::compress(data);
    let mut block = Vec::with_capacity(HEADER + payload.len());
    block.push(METHOD_LZ4);
    block.extend_from_slice(
        &u32::try_from(HEADER + payload.len())
            .expect("small")
            .to_le_bytes(),
    );
    block.extend_from_slice(&u32::try_from(data.len()).expect("small").to_le_bytes());
    block.extend_from_slice(&payload);
    let mut out = checksum(&block).to_vec();
    out.extend_from_slice(&block);
    out
}

pub(crate) fn decompress(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while !data.is_empty() {
        let (expected, rest) = data.split_at(16);
        let size = u32::from_le_bytes(rest[1..5].try_into().expect("4 bytes")) as usize;
        let raw_size = u32::from_le_bytes(rest[5..9].try_into().expect("4 bytes")) as usize;
        let block = &rest[..size];
        assert_eq!(checksum(block), expected, "block checksum");
        assert_eq!(block[0], METHOD_LZ4, "compression method");
        out.extend(lz4_flex::block::decompress(&block[HEADER..], raw_size).expect("valid LZ4"));
        data = &rest[size..];
    }
    out
}
