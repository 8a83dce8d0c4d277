//! The BERT encoder with int8 linear layers ([`super::qgemm`]), for CPUs with AVX-512 VNNI.
//! Each text runs alone (no padding, no mask), so a batch is spread over threads text by text.
//! The linear layers are four fifths of the work; attention, layer norms and exact (erf) GELU
//! stay f32 in loops shaped to vectorise, compiled by `pulp` for the CPU's widest instructions
//! (`mul_add` is a fused multiply-add there: this code only runs on AVX-512 CPUs).

use super::qgemm::{QLinear, Scratch};
use candle_core::{DType, Tensor};
use candle_transformers::models::bert::{Config as BertConfig, HiddenAct, PositionEmbeddingType};
use std::collections::HashMap;

struct Norm {
    weight: Vec<f32>,
    bias: Vec<f32>,
}

struct Layer {
    /// Query, key and value in one `[3·hidden, hidden]` product.
    qkv: QLinear,
    attn_out: QLinear,
    attn_norm: Norm,
    up: QLinear,
    down: QLinear,
    out_norm: Norm,
}

/// A BERT encoder whose linear layers are int8; [`QBert::embed`] returns the mean-pooled,
/// L2-normalised sentence vector.
pub(crate) struct QBert {
    hidden: usize,
    heads: usize,
    inter: usize,
    eps: f32,
    vocab: usize,
    max_positions: usize,
    type_vocab: usize,
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    norm: Norm,
    layers: Vec<Layer>,
    /// Buffers of earlier passes, reused: a text's activations are megabytes, and fresh ones
    /// cost page faults on every text (a tenth of the time).
    spare: std::sync::Mutex<Vec<Workspace>>,
}

/// One forward pass's buffers.
#[derive(Default)]
struct Workspace {
    x: Vec<f32>,
    qkv: Vec<f32>,
    ctx: Vec<f32>,
    tmp: Vec<f32>,
    up: Vec<f32>,
    scratch: Scratch,
    attn: Attention,
}

/// `v` as `len` zeros, keeping its allocation.
fn zeroed(v: &mut Vec<f32>, len: usize) -> &mut [f32] {
    v.clear();
    v.resize(len, 0.0);
    v
}

impl QBert {
    /// Builds the encoder from a checkpoint's tensors (names as in Hugging Face's `BertModel`,
    /// with or without a `bert.` prefix; layer norms as `weight`/`bias` or `gamma`/`beta`).
    /// Errors name the missing or misshapen tensor.
    pub(crate) fn from_tensors(
        tensors: &HashMap<String, Tensor>,
        config: &BertConfig,
    ) -> Result<QBert, String> {
        if !matches!(config.hidden_act, HiddenAct::Gelu) {
            return Err("only the exact GELU activation (`gelu`) runs in int8".into());
        }
        if !matches!(
            config.position_embedding_type,
            PositionEmbeddingType::Absolute
        ) {
            return Err("only absolute position embeddings run in int8".into());
        }
        let (hidden, heads, inter) = (
            config.hidden_size,
            config.num_attention_heads,
            config.intermediate_size,
        );
        if heads == 0 || hidden % heads != 0 {
            return Err(format!(
                "hidden size {hidden} is not a multiple of {heads} heads"
            ));
        }
        let get = |name: &str, len: usize| -> Result<Vec<f32>, String> {
            let alt = format!("bert.{name}");
            let t = tensors
                .get(name)
                .or_else(|| tensors.get(&alt))
                .ok_or_else(|| format!("tensor `{name}` is missing"))?;
            let v = t
                .to_dtype(DType::F32)
                .and_then(|t| t.flatten_all())
                .and_then(|t| t.to_vec1::<f32>())
                .map_err(|e| format!("tensor `{name}`: {e}"))?;
            if v.len() != len {
                return Err(format!(
                    "tensor `{name}` has {} values, expected {len}",
                    v.len()
                ));
            }
            Ok(v)
        };
        let norm = |prefix: &str| -> Result<Norm, String> {
            let weight = get(&format!("{prefix}.weight"), hidden)
                .or_else(|_| get(&format!("{prefix}.gamma"), hidden))?;
            let bias = get(&format!("{prefix}.bias"), hidden)
                .or_else(|_| get(&format!("{prefix}.beta"), hidden))?;
            Ok(Norm { weight, bias })
        };
        let linear = |names: &[&str], n_in: usize, n_out_each: usize| -> Result<QLinear, String> {
            let mut weight = Vec::with_capacity(names.len() * n_out_each * n_in);
            let mut bias = Vec::with_capacity(names.len() * n_out_each);
            for name in names {
                weight.extend(get(&format!("{name}.weight"), n_out_each * n_in)?);
                bias.extend(get(&format!("{name}.bias"), n_out_each)?);
            }
            Ok(QLinear::new(&weight, &bias, names.len() * n_out_each, n_in))
        };
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let p = format!("encoder.layer.{i}");
            layers.push(Layer {
                qkv: linear(
                    &[
                        &format!("{p}.attention.self.query"),
                        &format!("{p}.attention.self.key"),
                        &format!("{p}.attention.self.value"),
                    ],
                    hidden,
                    hidden,
                )?,
                attn_out: linear(&[&format!("{p}.attention.output.dense")], hidden, hidden)?,
                attn_norm: norm(&format!("{p}.attention.output.LayerNorm"))?,
                up: linear(&[&format!("{p}.intermediate.dense")], hidden, inter)?,
                down: linear(&[&format!("{p}.output.dense")], inter, hidden)?,
                out_norm: norm(&format!("{p}.output.LayerNorm"))?,
            });
        }
        Ok(QBert {
            hidden,
            heads,
            inter,
            eps: config.layer_norm_eps as f32,
            vocab: config.vocab_size,
            max_positions: config.max_position_embeddings,
            type_vocab: config.type_vocab_size.max(1),
            word: get(
                "embeddings.word_embeddings.weight",
                config.vocab_size * hidden,
            )?,
            position: get(
                "embeddings.position_embeddings.weight",
                config.max_position_embeddings * hidden,
            )?,
            token_type: get(
                "embeddings.token_type_embeddings.weight",
                config.type_vocab_size.max(1) * hidden,
            )?,
            norm: norm("embeddings.LayerNorm")?,
            layers,
            spare: std::sync::Mutex::default(),
        })
    }

    /// The sentence vector of one tokenised text (ids beyond the position table are dropped).
    pub(crate) fn embed(&self, ids: &[u32], types: &[u32]) -> Vec<f32> {
        let n = ids.len().min(types.len()).min(self.max_positions);
        if n == 0 {
            return vec![0.0; self.hidden];
        }
        let spare = || self.spare.lock().unwrap_or_else(|e| e.into_inner());
        let mut work = spare().pop().unwrap_or_default();
        let v = pulp::Arch::new().dispatch(Forward {
            model: self,
            ids: &ids[..n],
            types: &types[..n],
            work: &mut work,
        });
        spare().push(work);
        v
    }
}

/// One text's forward pass, as a [`pulp::WithSimd`] so that every loop in it is compiled for the
/// instruction set `pulp` picked at run time.
struct Forward<'a> {
    model: &'a QBert,
    ids: &'a [u32],
    types: &'a [u32],
    work: &'a mut Workspace,
}

impl pulp::WithSimd for Forward<'_> {
    type Output = Vec<f32>;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) -> Vec<f32> {
        let m = self.model;
        let (n, h) = (self.ids.len(), m.hidden);
        let w = self.work;
        let x = zeroed(&mut w.x, n * h);
        for (i, (row, (&id, &tt))) in x
            .chunks_exact_mut(h)
            .zip(self.ids.iter().zip(self.types))
            .enumerate()
        {
            let id = (id as usize).min(m.vocab - 1);
            let tt = (tt as usize).min(m.type_vocab - 1);
            let (w, p, t) = (
                &m.word[id * h..(id + 1) * h],
                &m.position[i * h..(i + 1) * h],
                &m.token_type[tt * h..(tt + 1) * h],
            );
            for (((o, w), p), t) in row.iter_mut().zip(w).zip(p).zip(t) {
                *o = w + p + t;
            }
            layer_norm(row, &m.norm, m.eps);
        }
        let scratch = &mut w.scratch;
        let qkv = zeroed(&mut w.qkv, n * 3 * h);
        let ctx = zeroed(&mut w.ctx, n * h);
        let tmp = zeroed(&mut w.tmp, n * h);
        let up = zeroed(&mut w.up, n * m.inter);
        let attn = &mut w.attn;
        attn.prepare(n, h / m.heads);
        for layer in &m.layers {
            layer.qkv.forward(x, n, qkv, scratch);
            for head in 0..m.heads {
                attn.head(qkv, h, head, ctx);
            }
            layer.attn_out.forward(ctx, n, tmp, scratch);
            add_norm(x, tmp, h, &layer.attn_norm, m.eps);
            layer.up.forward(x, n, up, scratch);
            for v in up.iter_mut() {
                *v = gelu(*v);
            }
            layer.down.forward(up, n, tmp, scratch);
            add_norm(x, tmp, h, &layer.out_norm, m.eps);
        }
        let mut pooled = vec![0f32; h];
        for row in x.chunks_exact(h) {
            for (p, v) in pooled.iter_mut().zip(row) {
                *p += v;
            }
        }
        let norm = sum16(&pooled.iter().map(|v| v * v).collect::<Vec<_>>()).sqrt();
        let scale = if norm > 0.0 { 1.0 / norm } else { 0.0 };
        pooled.iter_mut().for_each(|v| *v *= scale);
        pooled
    }
}

/// Query rows attention handles together (a shorter last block is padded with zero queries):
/// four independent multiply-add chains per key instead of one waiting on the last.
const ROWS: usize = 4;
/// Keys per score tile (two 16-lane registers per query row); key rows are padded to it.
const KEYS: usize = 32;

/// Scaled dot-product attention of one head, over blocks of [`ROWS`] query rows, as register
/// tiles over contiguous slices. Each row's accumulator is its own fixed-size array and every
/// loop has a constant trip count, so the compiler keeps them in vector registers (a 2-D array
/// indexed by row stays in memory, one lane at a time).
#[derive(Default)]
struct Attention {
    n: usize,
    /// `n` rounded up to a multiple of [`KEYS`].
    n_pad: usize,
    dh: usize,
    /// The head's keys transposed, `dh × n_pad` (padding keys are never weighed).
    keys_t: Vec<f32>,
    /// A block's scaled queries, `dh × ROWS` (a dimension's four values side by side).
    queries: Vec<[f32; ROWS]>,
    /// A block's scores over all keys, one row per query, `n_pad` each.
    scores: [Vec<f32>; ROWS],
}

impl Attention {
    /// Sized for `n` tokens of heads `dh` wide.
    fn prepare(&mut self, n: usize, dh: usize) {
        self.n = n;
        self.n_pad = n.div_ceil(KEYS) * KEYS;
        self.dh = dh;
        zeroed(&mut self.keys_t, dh * self.n_pad);
        self.queries.clear();
        self.queries.resize(dh, [0.0; ROWS]);
        for s in &mut self.scores {
            zeroed(s, self.n_pad);
        }
    }

    #[inline(always)]
    fn head(&mut self, qkv: &[f32], h: usize, head: usize, ctx: &mut [f32]) {
        let (n, n_pad, dh) = (self.n, self.n_pad, self.dh);
        let (q_at, k_at, v_at) = (head * dh, h + head * dh, 2 * h + head * dh);
        for (j, row) in qkv.chunks_exact(3 * h).enumerate() {
            for (d, k) in row[k_at..k_at + dh].iter().enumerate() {
                self.keys_t[d * n_pad + j] = *k;
            }
        }
        let scale = 1.0 / (dh as f32).sqrt();
        for i0 in (0..n).step_by(ROWS) {
            let rows = (n - i0).min(ROWS);
            for (d, q) in self.queries.iter_mut().enumerate() {
                *q = std::array::from_fn(|r| {
                    if r < rows {
                        qkv[(i0 + r) * 3 * h + q_at + d] * scale
                    } else {
                        0.0
                    }
                });
            }
            self.scores_block();
            for s in self.scores.iter_mut().take(rows) {
                softmax(&mut s[..n]);
            }
            let at = |r: usize| (i0 + r) * h + q_at;
            match dh {
                32 => {
                    let out = weighted_values::<32>(&self.scores, n, qkv, 3 * h, v_at);
                    for (r, o) in out.iter().take(rows).enumerate() {
                        ctx[at(r)..at(r) + 32].copy_from_slice(o);
                    }
                }
                64 => {
                    let out = weighted_values::<64>(&self.scores, n, qkv, 3 * h, v_at);
                    for (r, o) in out.iter().take(rows).enumerate() {
                        ctx[at(r)..at(r) + 64].copy_from_slice(o);
                    }
                }
                _ => {
                    for (r, p) in self.scores.iter().take(rows).enumerate() {
                        let out = &mut ctx[at(r)..at(r) + dh];
                        out.fill(0.0);
                        for (p, vrow) in p[..n].iter().zip(qkv.chunks_exact(3 * h)) {
                            for (o, v) in out.iter_mut().zip(&vrow[v_at..v_at + dh]) {
                                *o = p.mul_add(*v, *o);
                            }
                        }
                    }
                }
            }
        }
    }

    /// The block's scores over every key tile: `scores[r][j] = q_r · k_j` (queries pre-scaled).
    #[inline(always)]
    fn scores_block(&mut self) {
        let n_pad = self.n_pad;
        let [s0, s1, s2, s3] = &mut self.scores;
        for j0 in (0..n_pad).step_by(KEYS) {
            let (mut a0, mut a1, mut a2, mut a3) =
                ([0f32; KEYS], [0f32; KEYS], [0f32; KEYS], [0f32; KEYS]);
            for (k, q) in self.keys_t.chunks_exact(n_pad).zip(&self.queries) {
                let k: &[f32; KEYS] = k[j0..j0 + KEYS].try_into().expect("a key tile");
                for l in 0..KEYS {
                    a0[l] = q[0].mul_add(k[l], a0[l]);
                    a1[l] = q[1].mul_add(k[l], a1[l]);
                    a2[l] = q[2].mul_add(k[l], a2[l]);
                    a3[l] = q[3].mul_add(k[l], a3[l]);
                }
            }
            s0[j0..j0 + KEYS].copy_from_slice(&a0);
            s1[j0..j0 + KEYS].copy_from_slice(&a1);
            s2[j0..j0 + KEYS].copy_from_slice(&a2);
            s3[j0..j0 + KEYS].copy_from_slice(&a3);
        }
    }
}

/// `Σ_j p_rj · v_j` for the block's [`ROWS`] rows over a head's `D`-wide value rows, each row's
/// sum in its own registers.
#[inline(always)]
fn weighted_values<const D: usize>(
    p: &[Vec<f32>; ROWS],
    n: usize,
    qkv: &[f32],
    stride: usize,
    at: usize,
) -> [[f32; D]; ROWS] {
    let (mut a0, mut a1, mut a2, mut a3) = ([0f32; D], [0f32; D], [0f32; D], [0f32; D]);
    let [p0, p1, p2, p3] = p;
    for ((((row, p0), p1), p2), p3) in qkv
        .chunks_exact(stride)
        .zip(&p0[..n])
        .zip(&p1[..n])
        .zip(&p2[..n])
        .zip(&p3[..n])
    {
        let v: &[f32; D] = row[at..at + D].try_into().expect("a head's value row");
        for l in 0..D {
            a0[l] = p0.mul_add(v[l], a0[l]);
            a1[l] = p1.mul_add(v[l], a1[l]);
            a2[l] = p2.mul_add(v[l], a2[l]);
            a3[l] = p3.mul_add(v[l], a3[l]);
        }
    }
    [a0, a1, a2, a3]
}

/// `x = LayerNorm(x + add)`, row by row.
#[inline(always)]
fn add_norm(x: &mut [f32], add: &[f32], h: usize, norm: &Norm, eps: f32) {
    for (row, add) in x.chunks_exact_mut(h).zip(add.chunks_exact(h)) {
        for (x, a) in row.iter_mut().zip(add) {
            *x += a;
        }
        layer_norm(row, norm, eps);
    }
}

#[inline(always)]
fn layer_norm(row: &mut [f32], norm: &Norm, eps: f32) {
    let n = row.len() as f32;
    let mean = sum16(row) / n;
    row.iter_mut().for_each(|v| *v -= mean);
    let var = sum16_sq(row) / n;
    let inv = 1.0 / (var + eps).sqrt();
    for ((v, w), b) in row.iter_mut().zip(&norm.weight).zip(&norm.bias) {
        *v = *v * inv * w + b;
    }
}

/// A sum with 16 independent partial sums (a fixed order, so it vectorises without fast-math).
#[inline(always)]
fn sum16(x: &[f32]) -> f32 {
    let mut acc = [0f32; 16];
    let chunks = x.chunks_exact(16);
    let rest: f32 = chunks.remainder().iter().sum();
    for c in chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a += v;
        }
    }
    acc.iter().sum::<f32>() + rest
}

#[inline(always)]
fn sum16_sq(x: &[f32]) -> f32 {
    let mut acc = [0f32; 16];
    let chunks = x.chunks_exact(16);
    let rest: f32 = chunks.remainder().iter().map(|v| v * v).sum();
    for c in chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a += v * v;
        }
    }
    acc.iter().sum::<f32>() + rest
}

#[inline(always)]
fn max16(x: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; 16];
    let chunks = x.chunks_exact(16);
    let rest = chunks
        .remainder()
        .iter()
        .fold(f32::NEG_INFINITY, |m, v| m.max(*v));
    for c in chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a = a.max(*v);
        }
    }
    acc.iter().fold(rest, |m, v| m.max(*v))
}

#[inline(always)]
fn softmax(s: &mut [f32]) {
    let max = max16(s);
    for v in s.iter_mut() {
        *v = exp(*v - max);
    }
    let inv = 1.0 / sum16(s);
    s.iter_mut().for_each(|v| *v *= inv);
}

/// `e^x` in f32 (Cephes' polynomial on `[-ln2/2, ln2/2]`, scaled by `2^n` through the exponent
/// bits): branch-free, so a loop of it vectorises; relative error ~2e-7.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    let n = (x * std::f32::consts::LOG2_E + 0.5).floor();
    let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5;
    let e = p * r * r + r + 1.0;
    // 2^n through the exponent bits: n + 127 lies in [1, 254], so adding 1.5·2²³ leaves it as the
    // float's low mantissa bits (no saturating `as i32`, which would not vectorise).
    e * f32::from_bits((n + (127.0 + 12_582_912.0)).to_bits() << 23)
}

/// `erf(x)` as a rational function of `x²` on `[-4, 4]` (±1 outside): absolute error ~1e-7.
#[inline(always)]
pub(crate) fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = -2.726_142_3e-10_f32;
    p = p * x2 + 2.770_681_4e-8;
    p = p * x2 - 2.101_024e-6;
    p = p * x2 - 5.692_506_5e-5;
    p = p * x2 - 7.349_906_3e-4;
    p = p * x2 - 2.954_600_1e-3;
    p = p * x2 - 1.609_603_3e-2;
    let mut q = -1.456_607_2e-5_f32;
    q = q * x2 - 2.133_740_6e-4;
    q = q * x2 - 1.682_827e-3;
    q = q * x2 - 7.373_329e-3;
    q = q * x2 - 1.426_474e-2;
    x * p / q
}

/// Exact GELU, `x·Φ(x)`.
#[inline(always)]
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_and_erf_are_accurate_in_f32() {
        let mut worst_exp = 0f64;
        let mut worst_erf = 0f64;
        for i in -200_000..=200_000 {
            let x = i as f32 / 2_000.0; // [-100, 100]
            let want = f64::from(x).exp();
            if x > -87.0 && x < 88.0 {
                let rel = ((f64::from(exp(x)) - want) / want).abs();
                worst_exp = worst_exp.max(rel);
            }
            let e = f64::from(erf(x / 10.0)) - erf_f64(f64::from(x / 10.0));
            worst_erf = worst_erf.max(e.abs());
        }
        assert!(worst_exp < 5e-7, "exp relative error {worst_exp}");
        assert!(worst_erf < 5e-7, "erf absolute error {worst_erf}");
        assert!(exp(-1000.0) < 1e-37 && exp(1000.0).is_finite());
    }

    /// The tiled attention equals the plain formula for head widths with and without a tile
    /// kernel and for token counts that are not multiples of the row block or the key tile.
    #[test]
    fn tiled_attention_matches_the_plain_formula() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % 2001) as f32 / 1000.0 - 1.0
        };
        let mut attn = Attention::default();
        for (heads, dh) in [(2, 32), (1, 64), (3, 24)] {
            let h = heads * dh;
            for n in [1, 3, 4, 5, 31, 33, 70] {
                let qkv: Vec<f32> = (0..n * 3 * h).map(|_| 2.0 * next()).collect();
                let mut ctx = vec![f32::NAN; n * h];
                attn.prepare(n, dh);
                for head in 0..heads {
                    attn.head(&qkv, h, head, &mut ctx);
                }
                for head in 0..heads {
                    for i in 0..n {
                        let q = &qkv[i * 3 * h + head * dh..][..dh];
                        let scores: Vec<f64> = (0..n)
                            .map(|j| {
                                let k = &qkv[j * 3 * h + h + head * dh..][..dh];
                                let dot: f64 = q.iter().zip(k).map(|(a, b)| f64::from(a * b)).sum();
                                dot / (dh as f64).sqrt()
                            })
                            .collect();
                        let max = scores.iter().cloned().fold(f64::MIN, f64::max);
                        let w: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                        let total: f64 = w.iter().sum();
                        for d in 0..dh {
                            let want: f64 = (0..n)
                                .map(|j| {
                                    w[j] / total * f64::from(qkv[j * 3 * h + 2 * h + head * dh + d])
                                })
                                .sum();
                            let got = f64::from(ctx[i * h + head * dh + d]);
                            assert!(
                                (got - want).abs() < 1e-4,
                                "heads {heads} × {dh}, n {n}, row {i}, dim {d}: {got} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// A slow, accurate erf (series and continued fraction) to check against.
    fn erf_f64(x: f64) -> f64 {
        let t = x.abs();
        let v = if t < 2.5 {
            // Maclaurin series.
            let mut sum = 0.0;
            let mut term = t;
            let mut k = 0.0;
            while term.abs() > 1e-17 {
                sum += term / (2.0 * k + 1.0);
                k += 1.0;
                term *= -t * t / k;
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        } else {
            // Continued fraction for erfc.
            let mut f = 0.0;
            for k in (1..60).rev() {
                f = (k as f64 / 2.0) / (t + f);
            }
            1.0 - (-t * t).exp() / std::f64::consts::PI.sqrt() / (t + f)
        };
        v.copysign(x)
    }
}
