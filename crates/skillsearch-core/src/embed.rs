//! Sentence embeddings: the [`Embedder`] trait every embedder (the local model, the remote
//! endpoint in [`crate::llm::RemoteEmbedder`]) implements, and the vector helpers they share.

/// Turns texts into unit-length sentence vectors.
pub trait Embedder: Send + Sync {
    /// Stable id of the model (vectors of different ids never mix), e.g. "all-MiniLM-L6-v2" or "remote:<model>".
    fn id(&self) -> &str;
    /// Vector dimension.
    fn dim(&self) -> usize;
    /// One L2-normalised vector per text, in order.
    fn embed(&self, texts: &[&str]) -> crate::error::Result<Vec<Vec<f32>>>;
}

/// Scales `v` to unit length. Returns false (and leaves `v` alone) when its norm is zero or not
/// finite, so such a vector can be reported instead of silently kept.
pub fn l2_normalise(v: &mut [f32]) -> bool {
    let norm = v
        .iter()
        .map(|x| f64::from(*x) * f64::from(*x))
        .sum::<f64>()
        .sqrt();
    if !norm.is_finite() || norm == 0.0 {
        return false;
    }
    for x in v.iter_mut() {
        *x = (f64::from(*x) / norm) as f32;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_to_unit_length_and_refuses_zero_vectors() {
        let mut v = vec![3.0, 4.0];
        assert!(l2_normalise(&mut v));
        assert_eq!(v, [0.6, 0.8]);
        let mut z = vec![0.0, 0.0];
        assert!(!l2_normalise(&mut z));
        assert_eq!(z, [0.0, 0.0]);
    }
}
