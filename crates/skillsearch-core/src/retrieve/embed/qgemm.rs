//! Int8 linear layers for the sentence model. A weight matrix is quantised once, per output
//! column (symmetric, ±127); each input row is quantised as it arrives (symmetric, ±127, then
//! shifted by 128 to a byte, the shape `vpdpbusd` multiplies). The u8 × i8 products accumulate
//! exactly in i32 and are scaled back to f32, the shift removed with the column's code sum:
//! `Σ (a+128)·w = Σ a·w + 128·Σ w`.
//!
//! The product runs on AVX-512 VNNI, the only `unsafe` in the workspace: four-byte groups of a
//! row broadcast against 16 columns' packed groups. [`QLinear::forward_scalar`] computes the same
//! integers portably; the tests hold the two equal.
#![allow(unsafe_code)]

/// Output columns per packed block (one 512-bit register of i32 sums).
const LANES: usize = 16;
/// Rows per register tile.
const TILE_ROWS: usize = 8;

/// One linear layer `y = x·Wᵀ + b`, its weights as int8 codes packed for the kernel.
pub(crate) struct QLinear {
    n_in: usize,
    n_out: usize,
    /// Four-byte groups per input row (`n_in` rounded up to a multiple of 4, over 4).
    groups: usize,
    /// Column blocks of [`LANES`], an even number (pairs run together).
    blocks: usize,
    /// `[block][group][lane][4]` codes; padding columns and inputs are 0.
    packed: Vec<i8>,
    /// Per padded column: the weight scale (0 for padding) and the sum of its codes.
    scale: Vec<f32>,
    colsum: Vec<i32>,
    bias: Vec<f32>,
}

/// Reusable buffers for one thread's calls to [`QLinear::forward`].
#[derive(Default)]
pub(crate) struct Scratch {
    codes: Vec<u8>,
    scales: Vec<f32>,
    sums: Vec<i32>,
}

impl QLinear {
    /// Quantises `weight`, `[n_out][n_in]` row-major (the PyTorch layout), and keeps `bias`.
    pub(crate) fn new(weight: &[f32], bias: &[f32], n_out: usize, n_in: usize) -> QLinear {
        assert_eq!(weight.len(), n_out * n_in, "weight shape");
        assert_eq!(bias.len(), n_out, "bias shape");
        let groups = n_in.div_ceil(4);
        let blocks = n_out.div_ceil(2 * LANES) * 2;
        let cols = blocks * LANES;
        let mut packed = vec![0i8; blocks * groups * LANES * 4];
        let mut scale = vec![0f32; cols];
        let mut colsum = vec![0i32; cols];
        for j in 0..n_out {
            let row = &weight[j * n_in..(j + 1) * n_in];
            let amax = row.iter().fold(0f32, |m, w| m.max(w.abs()));
            if amax == 0.0 || !amax.is_finite() {
                continue;
            }
            let s = amax / 127.0;
            scale[j] = s;
            let (block, lane) = (j / LANES, j % LANES);
            for (k, w) in row.iter().enumerate() {
                let q = (w / s).round().clamp(-127.0, 127.0) as i8;
                colsum[j] += i32::from(q);
                packed[((block * groups + k / 4) * LANES + lane) * 4 + k % 4] = q;
            }
        }
        QLinear {
            n_in,
            n_out,
            groups,
            blocks,
            packed,
            scale,
            colsum,
            bias: bias.to_vec(),
        }
    }

    /// `y = x·Wᵀ + b` for the `rows` rows of `x` (`rows × n_in`), into `y` (`rows × n_out`).
    /// Call only where [`vnni_available`] holds. Inlined, so that its loops are compiled for the
    /// instruction set of the caller's `pulp` context.
    #[inline(always)]
    pub(crate) fn forward(&self, x: &[f32], rows: usize, y: &mut [f32], s: &mut Scratch) {
        self.quantise_rows(x, rows, s);
        let cols = self.blocks * LANES;
        s.sums.clear();
        s.sums.resize(rows * cols, 0);
        #[cfg(target_arch = "x86_64")]
        {
            assert!(vnni_available(), "QLinear::forward needs AVX-512 VNNI");
            // SAFETY: the CPU has the features `products_vnni` is compiled for (checked above);
            // the slices have the lengths its pointer arithmetic assumes (asserted inside).
            unsafe { products_vnni(self, &s.codes, rows, &mut s.sums) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        self.products_scalar(&s.codes, rows, &mut s.sums);
        self.finish(rows, s, y);
    }

    /// The same as [`QLinear::forward`] with the integer products computed portably.
    #[cfg(test)]
    pub(crate) fn forward_scalar(&self, x: &[f32], rows: usize, y: &mut [f32], s: &mut Scratch) {
        self.quantise_rows(x, rows, s);
        s.sums.clear();
        s.sums.resize(rows * self.blocks * LANES, 0);
        self.products_scalar(&s.codes, rows, &mut s.sums);
        self.finish(rows, s, y);
    }

    /// Each row as `groups·4` bytes `round(x/s)+128` (padding 128, i.e. zero), and its scale.
    /// Written as lane-wise loops without bounds checks or saturating casts, so they vectorise:
    /// a code is rounded by adding `1.5·2²³` (the float's low mantissa byte is then the
    /// nearest integer, ties to even) instead of `round() as i32`.
    #[inline(always)]
    fn quantise_rows(&self, x: &[f32], rows: usize, s: &mut Scratch) {
        assert_eq!(x.len(), rows * self.n_in, "input shape");
        let width = self.groups * 4;
        s.codes.clear();
        s.codes.resize(rows * width, 128);
        s.scales.clear();
        for (row, codes) in x
            .chunks_exact(self.n_in)
            .zip(s.codes.chunks_exact_mut(width))
        {
            let amax = abs_max(row);
            let (scale, inv) = if amax > 0.0 && amax.is_finite() {
                (amax / 127.0, 127.0 / amax)
            } else {
                (0.0, 0.0)
            };
            s.scales.push(scale);
            // |v·inv| ≤ 127, so v·inv + 128 lies in [1, 255]: its rounded value is one byte.
            const ROUND: f32 = 12_582_912.0; // 1.5 · 2^23
            for (c, v) in codes.iter_mut().zip(row) {
                *c = (v * inv + (128.0 + ROUND)).to_bits() as u8;
            }
        }
    }

    #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
    fn products_scalar(&self, codes: &[u8], rows: usize, sums: &mut [i32]) {
        let width = self.groups * 4;
        let cols = self.blocks * LANES;
        for r in 0..rows {
            let a = &codes[r * width..(r + 1) * width];
            for j in 0..cols {
                let (block, lane) = (j / LANES, j % LANES);
                let mut acc = 0i32;
                for g in 0..self.groups {
                    let w = &self.packed[((block * self.groups + g) * LANES + lane) * 4..][..4];
                    for t in 0..4 {
                        acc += i32::from(a[g * 4 + t]) * i32::from(w[t]);
                    }
                }
                sums[r * cols + j] = acc;
            }
        }
    }

    /// Integer sums back to f32: `(sum − 128·colsum)·s_row·s_col + bias`.
    #[inline(always)]
    fn finish(&self, rows: usize, s: &Scratch, y: &mut [f32]) {
        assert_eq!(y.len(), rows * self.n_out, "output shape");
        let cols = self.blocks * LANES;
        let (colsum, scale, bias) = (
            &self.colsum[..self.n_out],
            &self.scale[..self.n_out],
            &self.bias[..self.n_out],
        );
        for ((out, sums), sr) in y
            .chunks_exact_mut(self.n_out)
            .zip(s.sums.chunks_exact(cols))
            .zip(&s.scales)
        {
            for ((((o, sum), c), sc), b) in
                out.iter_mut().zip(sums).zip(colsum).zip(scale).zip(bias)
            {
                *o = (sum - 128 * c) as f32 * (sr * sc) + b;
            }
        }
    }
}

/// `max |x_i|` with 16 independent lanes (vectorises; NaN-free inputs give the exact maximum).
#[inline(always)]
fn abs_max(x: &[f32]) -> f32 {
    let mut acc = [0f32; 16];
    let chunks = x.chunks_exact(16);
    let rest = chunks.remainder().iter().fold(0f32, |m, v| m.max(v.abs()));
    for c in chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a = a.max(v.abs());
        }
    }
    acc.iter().fold(rest, |m, v| m.max(*v))
}

/// Whether this CPU runs the int8 kernel (AVX-512 F, BW and VNNI).
pub(crate) fn vnni_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// All rows' sums, tiles of up to [`TILE_ROWS`] rows by two column blocks.
///
/// # Safety
/// The CPU must have AVX-512 F, BW and VNNI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn products_vnni(w: &QLinear, codes: &[u8], rows: usize, sums: &mut [i32]) {
    // SAFETY: see the function's contract; every pointer below stays inside the asserted lengths.
    unsafe {
        let width = w.groups * 4;
        let cols = w.blocks * LANES;
        let block_len = w.groups * LANES * 4;
        assert!(codes.len() >= rows * width && sums.len() >= rows * cols);
        assert!(w.packed.len() >= w.blocks * block_len && w.blocks.is_multiple_of(2));
        let mut r = 0;
        while r < rows {
            let n = (rows - r).min(TILE_ROWS);
            for pair in 0..w.blocks / 2 {
                let b = w.packed.as_ptr().add(2 * pair * block_len);
                let a = codes.as_ptr().add(r * width);
                let out = sums.as_mut_ptr().add(r * cols + 2 * pair * LANES);
                // SAFETY (for each arm): `a` has `n` rows of `width` bytes, `b` two blocks of
                // `groups` 64-byte groups, `out` `n` rows of `cols` sums from column `2·pair·16`
                // on (asserted above).
                match n {
                    8 => tile::<8>(a, width, b, block_len, w.groups, out, cols),
                    7 => tile::<7>(a, width, b, block_len, w.groups, out, cols),
                    6 => tile::<6>(a, width, b, block_len, w.groups, out, cols),
                    5 => tile::<5>(a, width, b, block_len, w.groups, out, cols),
                    4 => tile::<4>(a, width, b, block_len, w.groups, out, cols),
                    3 => tile::<3>(a, width, b, block_len, w.groups, out, cols),
                    2 => tile::<2>(a, width, b, block_len, w.groups, out, cols),
                    _ => tile::<1>(a, width, b, block_len, w.groups, out, cols),
                }
            }
            r += n;
        }
    }
}

/// `R` rows × 32 columns: for every four-byte group, the rows' bytes broadcast against the two
/// blocks' 64 packed bytes, summed by `vpdpbusd` into 2·R registers.
///
/// # Safety
/// AVX-512 F, BW and VNNI; `a` holds `R` rows of `width ≥ 4·groups` bytes, `b` two blocks of
/// `groups·64` bytes `block_len` apart, `out` `R` rows of `cols ≥ 32` i32.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[inline]
unsafe fn tile<const R: usize>(
    a: *const u8,
    width: usize,
    b: *const i8,
    block_len: usize,
    groups: usize,
    out: *mut i32,
    cols: usize,
) {
    // SAFETY: the caller guarantees the features and the lengths (see the contract above).
    unsafe {
        use std::arch::x86_64::*;
        let mut acc = [[_mm512_setzero_si512(); 2]; R];
        for g in 0..groups {
            let b0 = _mm512_loadu_si512(b.add(g * 64).cast());
            let b1 = _mm512_loadu_si512(b.add(block_len + g * 64).cast());
            for (r, acc) in acc.iter_mut().enumerate() {
                let word = a.add(r * width + g * 4).cast::<i32>().read_unaligned();
                let av = _mm512_set1_epi32(word);
                acc[0] = _mm512_dpbusd_epi32(acc[0], av, b0);
                acc[1] = _mm512_dpbusd_epi32(acc[1], av, b1);
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            _mm512_storeu_si512(out.add(r * cols).cast(), acc[0]);
            _mm512_storeu_si512(out.add(r * cols + LANES).cast(), acc[1]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pseudo(n: usize, mut seed: u64, spread: f32) -> Vec<f32> {
        (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                ((seed % 2001) as f32 / 1000.0 - 1.0) * spread
            })
            .collect()
    }

    /// Ragged shapes (inputs not a multiple of 4, outputs not of 32, rows not of 8).
    const SHAPES: [(usize, usize, usize); 4] =
        [(1, 5, 3), (9, 38, 17), (13, 384, 1152), (3, 1536, 384)];

    #[test]
    fn the_int8_layer_tracks_the_f32_product() {
        for (rows, n_in, n_out) in SHAPES {
            let w = pseudo(n_out * n_in, 7 + n_in as u64, 0.2);
            let b = pseudo(n_out, 11, 0.1);
            let x = pseudo(rows * n_in, 3 + rows as u64, 2.0);
            let layer = QLinear::new(&w, &b, n_out, n_in);
            let mut y = vec![0f32; rows * n_out];
            layer.forward_scalar(&x, rows, &mut y, &mut Scratch::default());
            for r in 0..rows {
                for j in 0..n_out {
                    let exact: f32 = (0..n_in)
                        .map(|k| x[r * n_in + k] * w[j * n_in + k])
                        .sum::<f32>()
                        + b[j];
                    // Two 8-bit roundings per product: within ~1.5% of the product's scale.
                    let bound = 0.015
                        * (0..n_in)
                            .map(|k| (x[r * n_in + k] * w[j * n_in + k]).abs())
                            .sum::<f32>()
                        + 1e-4;
                    let got = y[r * n_out + j];
                    assert!(
                        (got - exact).abs() <= bound,
                        "{rows}x{n_in}x{n_out} [{r},{j}]: {got} vs {exact}"
                    );
                }
            }
        }
    }

    #[test]
    fn zero_rows_and_columns_give_the_bias() {
        let mut w = pseudo(4 * 6, 5, 1.0);
        w[6..12].fill(0.0);
        let layer = QLinear::new(&w, &[1.0, 2.0, 3.0, 4.0], 4, 6);
        let mut y = vec![0f32; 8];
        let x = [[0f32; 6], [1.0, -1.0, 0.5, 0.0, 2.0, 3.0]].concat();
        layer.forward_scalar(&x, 2, &mut y, &mut Scratch::default());
        assert_eq!(&y[..4], &[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(y[5], 2.0);
    }

    #[test]
    fn the_vnni_kernel_computes_the_same_integers_as_the_portable_one() {
        if !vnni_available() {
            eprintln!("skipped: this CPU has no AVX-512 VNNI (the int8 kernel is not used here)");
            return;
        }
        for (rows, n_in, n_out) in SHAPES.into_iter().chain([(8, 4, 32), (17, 384, 384)]) {
            let w = pseudo(n_out * n_in, 17 + n_out as u64, 0.3);
            let b = pseudo(n_out, 1, 0.1);
            let x = pseudo(rows * n_in, 29 + rows as u64, 3.0);
            let layer = QLinear::new(&w, &b, n_out, n_in);
            let (mut fast, mut slow) = (vec![0f32; rows * n_out], vec![0f32; rows * n_out]);
            layer.forward(&x, rows, &mut fast, &mut Scratch::default());
            layer.forward_scalar(&x, rows, &mut slow, &mut Scratch::default());
            assert_eq!(fast, slow, "{rows}x{n_in}x{n_out}");
        }
    }
}
