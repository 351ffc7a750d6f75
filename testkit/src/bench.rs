//! What the benches share: a seeded random source, so every run generates the same data, and the
//! process's resident memory.

/// Deterministic pseudo-random numbers (xorshift64).
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// A random vector of length 1 with `dim` components.
    pub fn unit_vector(&mut self, dim: usize) -> Vec<f32> {
        let v: Vec<f32> = (0..dim).map(|_| (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32 - 0.5).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }
}

/// This process's resident memory (`VmRSS` of `/proc/self/status`) in MiB; None where there is no
/// such file (not Linux).
pub fn vm_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    kb.trim().trim_end_matches("kB").trim().parse::<f64>().ok().map(|kb| kb / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_is_xorshift64_from_the_seed() {
        let mut rng = Rng(1);
        assert_eq!(rng.next_u64(), 1082269761);
        assert_eq!(rng.next_u64(), 1152992998833853505);
        // The seed of rr-indexer's bench: its generated tree stays the one it always was.
        let mut rng = Rng(0x1dea_5eed);
        let draws: Vec<usize> = (0..8).map(|_| rng.below(16)).collect();
        assert_eq!(draws, [0, 2, 6, 9, 4, 4, 9, 9]);
    }

    #[test]
    fn unit_vectors_have_length_one() {
        let v = Rng(7).unit_vector(256);
        assert_eq!(v.len(), 256);
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{norm}");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn resident_memory_is_read_on_linux() {
        let rss = vm_rss_mib().expect("VmRSS");
        assert!(rss > 0.0 && rss < 1e6, "{rss}");
    }
}
