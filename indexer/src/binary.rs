//! Binary detection, as the reference indexer does it.
//!
//! The reference skips a file when it contains a NUL byte or when
//! `binaryornot.helpers.is_binary_string` (binaryornot 0.6.0) says so for the
//! *whole* file. That function checks a list of magic signatures, then feeds 24
//! byte statistics to a trained decision tree. [`is_binary_string`] is a port of
//! it: the signatures, features and tree below are transcribed from
//! binaryornot 0.6.0 (MIT License, Copyright (c) 2026 Audrey Roy Greenfeld).
//!
//! Exactness: features 0..=17 and 23 are computed exactly as in Python. Features
//! 18..=22 ("decodes as GB2312 / Big5 / Shift-JIS / EUC-JP / EUC-KR") check the
//! byte structure of each encoding but not the unassigned cells of its
//! character table, which Python's codecs also reject. The tree only consults
//! them for text that is not valid UTF-8, so UTF-8 and ASCII files are
//! classified exactly.

/// Whether the reference would skip a file with these bytes as binary.
pub fn is_binary(data: &[u8]) -> bool {
    data.contains(&0) || is_binary_string(data)
}

/// Port of binaryornot 0.6.0 `is_binary_string`.
pub fn is_binary_string(data: &[u8]) -> bool {
    if data.is_empty() {
        return false;
    }
    if has_signature(data) {
        return true;
    }
    classify(&features(data))
}

fn has_signature(data: &[u8]) -> bool {
    SIGNATURES.iter().any(|sig| data.starts_with(sig))
}

/// Control bytes other than tab, LF and CR.
fn is_control(b: u8) -> bool {
    b < 32 && !matches!(b, 9 | 10 | 13)
}

fn features(data: &[u8]) -> [f64; 24] {
    let n = data.len();
    let nf = n as f64;
    let ratio = |count: usize| count as f64 / nf;
    let flag = |ok: bool| if ok { 1.0 } else { 0.0 };

    let nulls = data.iter().filter(|&&b| b == 0).count();
    let controls = data.iter().filter(|&&b| is_control(b)).count();
    let printable = data.iter().filter(|&&b| (0x20..=0x7e).contains(&b)).count();
    let high = data.iter().filter(|&&b| b >= 0x80).count();

    let even_total = n.div_ceil(2);
    let odd_total = n / 2;
    let even_nulls = data.iter().step_by(2).filter(|&&b| b == 0).count();
    let odd_nulls = data.iter().skip(1).step_by(2).filter(|&&b| b == 0).count();
    let even_null_ratio = if even_total > 0 { even_nulls as f64 / even_total as f64 } else { 0.0 };
    let odd_null_ratio = if odd_total > 0 { odd_nulls as f64 / odd_total as f64 } else { 0.0 };

    let mut histogram = [0usize; 256];
    for &b in data {
        histogram[usize::from(b)] += 1;
    }
    let mut entropy = 0.0f64;
    for &count in &histogram {
        if count > 0 {
            let p = count as f64 / nf;
            entropy -= p * p.log2();
        }
    }

    let (mut max_run, mut run) = (0usize, 0usize);
    for &b in data {
        if (0x20..=0x7e).contains(&b) || matches!(b, 9 | 10 | 13) {
            run += 1;
            max_run = max_run.max(run);
        } else {
            run = 0;
        }
    }

    let long_enough = n >= 10;
    [
        ratio(nulls),
        ratio(controls),
        ratio(printable),
        ratio(high),
        flag(std::str::from_utf8(data).is_ok()),
        even_null_ratio,
        odd_null_ratio,
        entropy,
        flag(data.starts_with(b"\xff\xfe\x00\x00")),
        flag(data.starts_with(b"\x00\x00\xfe\xff")),
        flag(data.starts_with(b"\xff\xfe") && !data.starts_with(b"\xff\xfe\x00\x00")),
        flag(data.starts_with(b"\xfe\xff")),
        flag(data.starts_with(b"\xef\xbb\xbf")),
        flag(long_enough && decodes_utf16(data, u16::from_le_bytes)),
        flag(long_enough && decodes_utf16(data, u16::from_be_bytes)),
        flag(n >= 16 && decodes_utf32(data, u32::from_le_bytes)),
        flag(n >= 16 && decodes_utf32(data, u32::from_be_bytes)),
        ratio(max_run),
        flag(long_enough && decodes_gb2312(data)),
        flag(long_enough && decodes_big5(data)),
        flag(long_enough && decodes_shift_jis(data)),
        flag(long_enough && decodes_euc_jp(data)),
        flag(long_enough && decodes_euc_kr(data)),
        flag(has_signature(data)),
    ]
}

/// Python's strict UTF-16 decoding: whole code units, paired surrogates.
fn decodes_utf16(data: &[u8], unit: fn([u8; 2]) -> u16) -> bool {
    data.len().is_multiple_of(2)
        && char::decode_utf16(data.chunks_exact(2).map(|c| unit([c[0], c[1]]))).all(|r| r.is_ok())
}

/// Python's strict UTF-32 decoding: whole units, scalar values only.
fn decodes_utf32(data: &[u8], unit: fn([u8; 4]) -> u32) -> bool {
    data.len().is_multiple_of(4)
        && data.chunks_exact(4).all(|c| char::from_u32(unit([c[0], c[1], c[2], c[3]])).is_some())
}

/// Walks `data` as a multi-byte encoding: ASCII stays single; `step` returns
/// the length of the sequence starting with a non-ASCII byte, or `None`.
fn decodes_with(data: &[u8], step: impl Fn(&[u8]) -> Option<usize>) -> bool {
    let mut i = 0;
    while i < data.len() {
        if data[i] < 0x80 {
            i += 1;
            continue;
        }
        match step(&data[i..]) {
            Some(len) => i += len,
            None => return false,
        }
    }
    true
}

fn byte_in(rest: &[u8], at: usize, lo: u8, hi: u8) -> bool {
    rest.get(at).is_some_and(|b| (lo..=hi).contains(b))
}

fn decodes_gb2312(data: &[u8]) -> bool {
    decodes_with(data, |rest| {
        let lead = rest[0];
        let rows = (0xa1..=0xa9).contains(&lead) || (0xb0..=0xf7).contains(&lead);
        (rows && byte_in(rest, 1, 0xa1, 0xfe) && !(lead == 0xd7 && rest[1] >= 0xfa)).then_some(2)
    })
}

fn decodes_big5(data: &[u8]) -> bool {
    decodes_with(data, |rest| {
        let lead = rest[0];
        let trail = byte_in(rest, 1, 0x40, 0x7e) || byte_in(rest, 1, 0xa1, 0xfe);
        ((0xa1..=0xf9).contains(&lead) && !(0xc7..=0xc8).contains(&lead) && trail).then_some(2)
    })
}

fn decodes_shift_jis(data: &[u8]) -> bool {
    decodes_with(data, |rest| {
        let lead = rest[0];
        if (0xa1..=0xdf).contains(&lead) {
            return Some(1);
        }
        let lead_ok = (0x81..=0x9f).contains(&lead) || (0xe0..=0xea).contains(&lead);
        let trail_ok = byte_in(rest, 1, 0x40, 0x7e) || byte_in(rest, 1, 0x80, 0xfc);
        (lead_ok && trail_ok).then_some(2)
    })
}

fn decodes_euc_jp(data: &[u8]) -> bool {
    decodes_with(data, |rest| match rest[0] {
        0x8e => byte_in(rest, 1, 0xa1, 0xdf).then_some(2),
        0x8f => (byte_in(rest, 1, 0xa1, 0xfe) && byte_in(rest, 2, 0xa1, 0xfe)).then_some(3),
        lead => ((0xa1..=0xf4).contains(&lead) && byte_in(rest, 1, 0xa1, 0xfe)).then_some(2),
    })
}

fn decodes_euc_kr(data: &[u8]) -> bool {
    decodes_with(data, |rest| {
        let lead = rest[0];
        ((0xa1..=0xfd).contains(&lead) && lead != 0xc9 && byte_in(rest, 1, 0xa1, 0xfe)).then_some(2)
    })
}

/// A node of the decision tree: go to `le` when `features[feature] <= threshold`.
#[derive(Clone, Copy)]
enum Node {
    Split { feature: usize, threshold: f64, le: usize, gt: usize },
    Leaf(bool),
}
use Node::{Leaf, Split};

fn classify(features: &[f64; 24]) -> bool {
    let mut at = 0;
    loop {
        match TREE[at] {
            Leaf(binary) => return binary,
            Split { feature, threshold, le, gt } => at = if features[feature] <= threshold { le } else { gt },
        }
    }
}

/// binaryornot 0.6.0 `binary_formats.csv`, the rows with a magic number.
const SIGNATURES: &[&[u8]] = &[
    b"\x89PNG\x0d\x0a\x1a\x0a",          // png
    b"\xff\xd8\xff\xe0",                 // jpeg_jfif
    b"\xff\xd8\xff\xe1",                 // jpeg_exif
    b"GIF87a",                           // gif87a
    b"GIF89a",                           // gif89a
    b"BM",                               // bmp
    b"MM\x00*",                          // tiff_be
    b"II*\x00",                          // tiff_le
    b"\x00\x00\x01\x00",                 // ico
    b"%PDF-1.",                          // pdf
    b"SQLite format 3\x00",              // sqlite
    b"PK\x03\x04",                       // zip
    b"\x1f\x8b\x08",                     // gzip
    b"\xfd7zXZ\x00",                     // xz
    b"\x7fELF",                          // elf
    b"\xfe\xed\xfa\xce",                 // macho_32be
    b"\xce\xfa\xed\xfe",                 // macho_32le
    b"\xfe\xed\xfa\xcf",                 // macho_64be
    b"\xcf\xfa\xed\xfe",                 // macho_64le
    b"MZ",                               // mz
    b"\xca\xfe\xba\xbe",                 // java_class
    b"RIFF",                             // riff
    b"OggS",                             // ogg
    b"fLaC",                             // flac
    b"\x00asm",                          // wasm
    b"wOFF",                             // woff
    b"OTTO",                             // otf
    b"\x00\x01\x00\x00\x00",             // ttf
    b"\x00\x00\x00\x01Bud1",             // ds_store
    b"wOF2",                             // woff2
    b"RIFF\x00\x00\x00\x00WEBP",         // webp
    b"\x00\x00\x00\x18ftyp",             // mp4
    b"ID3",                              // mp3_id3
    b"BZh",                              // bzip2
    b"7z\xbc\xaf'\x1c",                  // 7z
    b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", // ole2
    b"(\xb5/\xfd",                       // zstd
    b"Rar!\x1a\x07",                     // rar
    b"\x1aE\xdf\xa3",                    // matroska
    b"MThd",                             // midi
    b"8BPS",                             // psd
    b"\x00\x00\x00\x1cftypheic",         // heif
    b"PAR1",                             // parquet
    b"dex\x0a",                          // dex
    b"BC\xc0\xde",                       // llvm_bc
    b"PACK",                             // git_pack
    b"bplist",                           // bplist
    b"!<arch>\x0a",                      // ar
    b"\x04\x22M\x18",                    // lz4
    b"ARROW1",                           // arrow_ipc
    b"Obj\x01",                          // avro
    b"]\x00\x00",                        // lzma
    b"\xa1\xb2\xc3\xd4",                 // pcap
    b"\xff\x06\x00\x00sNaPpY",           // snappy
    b"\xfe\xed\xfe\xed",                 // jks
    b"070701",                           // cpio
];

/// binaryornot 0.6.0 `tree.py`, flattened in pre-order.
const TREE: [Node; 199] = [
    /*   0 */ Split { feature: 1, threshold: 0.000977, le: 1, gt: 64 },
    /*   1 */ Split { feature: 17, threshold: 0.000977, le: 2, gt: 13 },
    /*   2 */ Split { feature: 4, threshold: 0.500000, le: 3, gt: 12 },
    /*   3 */ Split { feature: 22, threshold: 0.500000, le: 4, gt: 11 },
    /*   4 */ Split { feature: 7, threshold: 1.953445, le: 5, gt: 6 },
    /*   5 */ Leaf(true),
    /*   6 */ Split { feature: 7, threshold: 2.749470, le: 7, gt: 8 },
    /*   7 */ Leaf(false),
    /*   8 */ Split { feature: 14, threshold: 0.500000, le: 9, gt: 10 },
    /*   9 */ Leaf(true),
    /*  10 */ Leaf(true),
    /*  11 */ Leaf(false),
    /*  12 */ Leaf(false),
    /*  13 */ Split { feature: 4, threshold: 0.500000, le: 14, gt: 63 },
    /*  14 */ Split { feature: 17, threshold: 0.063636, le: 15, gt: 20 },
    /*  15 */ Split { feature: 7, threshold: 2.021329, le: 16, gt: 17 },
    /*  16 */ Leaf(true),
    /*  17 */ Split { feature: 13, threshold: 0.500000, le: 18, gt: 19 },
    /*  18 */ Leaf(false),
    /*  19 */ Leaf(false),
    /*  20 */ Split { feature: 7, threshold: 3.047898, le: 21, gt: 22 },
    /*  21 */ Leaf(false),
    /*  22 */ Split { feature: 2, threshold: 0.758706, le: 23, gt: 62 },
    /*  23 */ Split { feature: 17, threshold: 0.134848, le: 24, gt: 35 },
    /*  24 */ Split { feature: 3, threshold: 0.633612, le: 25, gt: 32 },
    /*  25 */ Split { feature: 7, threshold: 3.851786, le: 26, gt: 27 },
    /*  26 */ Leaf(false),
    /*  27 */ Split { feature: 3, threshold: 0.483333, le: 28, gt: 29 },
    /*  28 */ Leaf(false),
    /*  29 */ Split { feature: 17, threshold: 0.129167, le: 30, gt: 31 },
    /*  30 */ Leaf(true),
    /*  31 */ Leaf(false),
    /*  32 */ Split { feature: 2, threshold: 0.145455, le: 33, gt: 34 },
    /*  33 */ Leaf(false),
    /*  34 */ Leaf(true),
    /*  35 */ Split { feature: 19, threshold: 0.500000, le: 36, gt: 59 },
    /*  36 */ Split { feature: 7, threshold: 3.572021, le: 37, gt: 48 },
    /*  37 */ Split { feature: 3, threshold: 0.490000, le: 38, gt: 41 },
    /*  38 */ Split { feature: 2, threshold: 0.651515, le: 39, gt: 40 },
    /*  39 */ Leaf(false),
    /*  40 */ Leaf(true),
    /*  41 */ Split { feature: 7, threshold: 3.370112, le: 42, gt: 43 },
    /*  42 */ Leaf(true),
    /*  43 */ Split { feature: 3, threshold: 0.651515, le: 44, gt: 47 },
    /*  44 */ Split { feature: 17, threshold: 0.318182, le: 45, gt: 46 },
    /*  45 */ Leaf(true),
    /*  46 */ Leaf(true),
    /*  47 */ Leaf(true),
    /*  48 */ Split { feature: 2, threshold: 0.615079, le: 49, gt: 56 },
    /*  49 */ Split { feature: 20, threshold: 0.500000, le: 50, gt: 53 },
    /*  50 */ Split { feature: 13, threshold: 0.500000, le: 51, gt: 52 },
    /*  51 */ Leaf(true),
    /*  52 */ Leaf(true),
    /*  53 */ Split { feature: 17, threshold: 0.176923, le: 54, gt: 55 },
    /*  54 */ Leaf(false),
    /*  55 */ Leaf(true),
    /*  56 */ Split { feature: 17, threshold: 0.252381, le: 57, gt: 58 },
    /*  57 */ Leaf(false),
    /*  58 */ Leaf(true),
    /*  59 */ Split { feature: 7, threshold: 3.889752, le: 60, gt: 61 },
    /*  60 */ Leaf(true),
    /*  61 */ Leaf(false),
    /*  62 */ Leaf(false),
    /*  63 */ Leaf(false),
    /*  64 */ Split { feature: 0, threshold: 0.163978, le: 65, gt: 158 },
    /*  65 */ Split { feature: 4, threshold: 0.500000, le: 66, gt: 153 },
    /*  66 */ Split { feature: 7, threshold: 3.264621, le: 67, gt: 80 },
    /*  67 */ Split { feature: 17, threshold: 0.022678, le: 68, gt: 73 },
    /*  68 */ Split { feature: 2, threshold: 0.000977, le: 69, gt: 72 },
    /*  69 */ Split { feature: 5, threshold: 0.001953, le: 70, gt: 71 },
    /*  70 */ Leaf(false),
    /*  71 */ Leaf(true),
    /*  72 */ Leaf(true),
    /*  73 */ Split { feature: 1, threshold: 0.095455, le: 74, gt: 79 },
    /*  74 */ Split { feature: 17, threshold: 0.306818, le: 75, gt: 78 },
    /*  75 */ Split { feature: 1, threshold: 0.055728, le: 76, gt: 77 },
    /*  76 */ Leaf(false),
    /*  77 */ Leaf(false),
    /*  78 */ Leaf(true),
    /*  79 */ Leaf(false),
    /*  80 */ Split { feature: 10, threshold: 0.500000, le: 81, gt: 150 },
    /*  81 */ Split { feature: 2, threshold: 0.455534, le: 82, gt: 105 },
    /*  82 */ Split { feature: 3, threshold: 0.790570, le: 83, gt: 104 },
    /*  83 */ Split { feature: 1, threshold: 0.485714, le: 84, gt: 103 },
    /*  84 */ Split { feature: 7, threshold: 3.540884, le: 85, gt: 96 },
    /*  85 */ Split { feature: 7, threshold: 3.528408, le: 86, gt: 95 },
    /*  86 */ Split { feature: 2, threshold: 0.316667, le: 87, gt: 94 },
    /*  87 */ Split { feature: 2, threshold: 0.286364, le: 88, gt: 91 },
    /*  88 */ Split { feature: 17, threshold: 0.095455, le: 89, gt: 90 },
    /*  89 */ Leaf(true),
    /*  90 */ Leaf(true),
    /*  91 */ Split { feature: 13, threshold: 0.500000, le: 92, gt: 93 },
    /*  92 */ Leaf(false),
    /*  93 */ Leaf(true),
    /*  94 */ Leaf(true),
    /*  95 */ Leaf(false),
    /*  96 */ Split { feature: 2, threshold: 0.446657, le: 97, gt: 98 },
    /*  97 */ Leaf(true),
    /*  98 */ Split { feature: 17, threshold: 0.066638, le: 99, gt: 102 },
    /*  99 */ Split { feature: 2, threshold: 0.450099, le: 100, gt: 101 },
    /* 100 */ Leaf(false),
    /* 101 */ Leaf(true),
    /* 102 */ Leaf(true),
    /* 103 */ Leaf(false),
    /* 104 */ Leaf(false),
    /* 105 */ Split { feature: 3, threshold: 0.425959, le: 106, gt: 131 },
    /* 106 */ Split { feature: 3, threshold: 0.394552, le: 107, gt: 120 },
    /* 107 */ Split { feature: 7, threshold: 4.209417, le: 108, gt: 117 },
    /* 108 */ Split { feature: 7, threshold: 4.175213, le: 109, gt: 116 },
    /* 109 */ Split { feature: 3, threshold: 0.100962, le: 110, gt: 111 },
    /* 110 */ Leaf(false),
    /* 111 */ Split { feature: 3, threshold: 0.248047, le: 112, gt: 113 },
    /* 112 */ Leaf(true),
    /* 113 */ Split { feature: 17, threshold: 0.106443, le: 114, gt: 115 },
    /* 114 */ Leaf(false),
    /* 115 */ Leaf(true),
    /* 116 */ Leaf(false),
    /* 117 */ Split { feature: 23, threshold: 0.500000, le: 118, gt: 119 },
    /* 118 */ Leaf(true),
    /* 119 */ Leaf(true),
    /* 120 */ Split { feature: 17, threshold: 0.082906, le: 121, gt: 122 },
    /* 121 */ Leaf(false),
    /* 122 */ Split { feature: 1, threshold: 0.025000, le: 123, gt: 124 },
    /* 123 */ Leaf(false),
    /* 124 */ Split { feature: 7, threshold: 3.520764, le: 125, gt: 126 },
    /* 125 */ Leaf(false),
    /* 126 */ Split { feature: 1, threshold: 0.122500, le: 127, gt: 128 },
    /* 127 */ Leaf(true),
    /* 128 */ Split { feature: 0, threshold: 0.033333, le: 129, gt: 130 },
    /* 129 */ Leaf(false),
    /* 130 */ Leaf(true),
    /* 131 */ Split { feature: 17, threshold: 0.098599, le: 132, gt: 139 },
    /* 132 */ Split { feature: 1, threshold: 0.012902, le: 133, gt: 134 },
    /* 133 */ Leaf(true),
    /* 134 */ Split { feature: 23, threshold: 0.500000, le: 135, gt: 136 },
    /* 135 */ Leaf(false),
    /* 136 */ Split { feature: 3, threshold: 0.458087, le: 137, gt: 138 },
    /* 137 */ Leaf(true),
    /* 138 */ Leaf(true),
    /* 139 */ Split { feature: 7, threshold: 4.453697, le: 140, gt: 149 },
    /* 140 */ Split { feature: 3, threshold: 0.472136, le: 141, gt: 148 },
    /* 141 */ Split { feature: 17, threshold: 0.121324, le: 142, gt: 143 },
    /* 142 */ Leaf(false),
    /* 143 */ Split { feature: 17, threshold: 0.302885, le: 144, gt: 147 },
    /* 144 */ Split { feature: 7, threshold: 3.539612, le: 145, gt: 146 },
    /* 145 */ Leaf(false),
    /* 146 */ Leaf(true),
    /* 147 */ Leaf(false),
    /* 148 */ Leaf(true),
    /* 149 */ Leaf(true),
    /* 150 */ Split { feature: 14, threshold: 0.500000, le: 151, gt: 152 },
    /* 151 */ Leaf(false),
    /* 152 */ Leaf(false),
    /* 153 */ Split { feature: 1, threshold: 0.450000, le: 154, gt: 157 },
    /* 154 */ Split { feature: 1, threshold: 0.006212, le: 155, gt: 156 },
    /* 155 */ Leaf(true),
    /* 156 */ Leaf(false),
    /* 157 */ Leaf(true),
    /* 158 */ Split { feature: 23, threshold: 0.500000, le: 159, gt: 196 },
    /* 159 */ Split { feature: 3, threshold: 0.082843, le: 160, gt: 175 },
    /* 160 */ Split { feature: 6, threshold: 0.282534, le: 161, gt: 162 },
    /* 161 */ Leaf(false),
    /* 162 */ Split { feature: 7, threshold: 3.088801, le: 163, gt: 172 },
    /* 163 */ Split { feature: 0, threshold: 0.822852, le: 164, gt: 169 },
    /* 164 */ Split { feature: 2, threshold: 0.291667, le: 165, gt: 166 },
    /* 165 */ Leaf(false),
    /* 166 */ Split { feature: 1, threshold: 0.521739, le: 167, gt: 168 },
    /* 167 */ Leaf(false),
    /* 168 */ Leaf(true),
    /* 169 */ Split { feature: 16, threshold: 0.500000, le: 170, gt: 171 },
    /* 170 */ Leaf(true),
    /* 171 */ Leaf(true),
    /* 172 */ Split { feature: 5, threshold: 0.140625, le: 173, gt: 174 },
    /* 173 */ Leaf(false),
    /* 174 */ Leaf(true),
    /* 175 */ Split { feature: 17, threshold: 0.291667, le: 176, gt: 195 },
    /* 176 */ Split { feature: 7, threshold: 0.698576, le: 177, gt: 178 },
    /* 177 */ Leaf(true),
    /* 178 */ Split { feature: 7, threshold: 5.613847, le: 179, gt: 192 },
    /* 179 */ Split { feature: 2, threshold: 0.361264, le: 180, gt: 187 },
    /* 180 */ Split { feature: 20, threshold: 0.500000, le: 181, gt: 182 },
    /* 181 */ Leaf(false),
    /* 182 */ Split { feature: 14, threshold: 0.500000, le: 183, gt: 186 },
    /* 183 */ Split { feature: 0, threshold: 0.379808, le: 184, gt: 185 },
    /* 184 */ Leaf(false),
    /* 185 */ Leaf(true),
    /* 186 */ Leaf(false),
    /* 187 */ Split { feature: 2, threshold: 0.408333, le: 188, gt: 191 },
    /* 188 */ Split { feature: 1, threshold: 0.260000, le: 189, gt: 190 },
    /* 189 */ Leaf(false),
    /* 190 */ Leaf(true),
    /* 191 */ Leaf(false),
    /* 192 */ Split { feature: 17, threshold: 0.012485, le: 193, gt: 194 },
    /* 193 */ Leaf(false),
    /* 194 */ Leaf(true),
    /* 195 */ Leaf(true),
    /* 196 */ Split { feature: 20, threshold: 0.500000, le: 197, gt: 198 },
    /* 197 */ Leaf(true),
    /* 198 */ Leaf(true),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn agrees_with_binaryornot() {
        // (bytes, binaryornot 0.6.0 `is_binary_string`)
        let cases = [
            ("", false),
            ("68656c6c6f20776f726c640a", false),
            ("89504e470d0a1a0a0000", true),
            // Text that happens to start with a BMP or ID3 signature is binary.
            ("424d20697320686f7720746869732074657874207374617274730a", true),
            ("494433207461677320617265206c697374656420686572650a", true),
            ("636166e9206e61ef76652072e973756de920e0206c612063617274650a", false),
            (
                "680065006c006c006f00200077006f0072006c0064002c002000740068006900730020006900730020007400650078007400",
                false,
            ),
            (
                "fffe680065006c006c006f00200077006f0072006c0064002c002000740068006900730020006900730020007400650078007400",
                false,
            ),
            ("8366815b835e8378815b835890dd92e8", false),
            ("b5a5c0ccc5cdbaa3c0ccbdba20bcb3c1a420c6c4c0cf", false),
            ("1b5b33316d7265641b5b306d0a", false),
        ];
        for (bytes, expected) in cases {
            assert_eq!(is_binary_string(&hex(bytes)), expected, "{bytes}");
        }
        let controls: Vec<u8> = (1..32).cycle().take(124).collect();
        assert!(is_binary_string(&controls));
        let high: Vec<u8> = (128..=255).collect();
        assert!(is_binary_string(&high));
    }

    #[test]
    fn nul_anywhere_is_binary() {
        assert!(is_binary(b"plain text\0more text"));
        assert!(!is_binary(b"plain text"));
        assert!(!is_binary(b""));
    }

    #[test]
    fn tree_is_well_formed() {
        for (i, node) in TREE.iter().enumerate() {
            if let Split { feature, le, gt, .. } = *node {
                assert!(feature < 24 && le > i && gt > i && le < TREE.len() && gt < TREE.len());
            }
        }
    }
}
