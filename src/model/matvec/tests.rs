use super::*;

fn naive(x: &[f32], rows: usize, w: &[f32], out: usize, inn: usize) -> Vec<f64> {
    let mut y = vec![0f64; rows * out];
    for r in 0..rows {
        for o in 0..out {
            y[r * out + o] = (0..inn)
                .map(|i| f64::from(x[r * inn + i]) * f64::from(w[o * inn + i]))
                .sum();
        }
    }
    y
}

fn data(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

#[test]
fn products_match_and_do_not_depend_on_the_rows_beside() {
    // Lengths with and without a tail after the 32-wide steps; weights above and
    // below the size handed to other cores.
    for (out, inn) in [(3, 7), (17, 40), (96, 100), (600, 2048)] {
        let w = data(out * inn, 1);
        let x = data(4 * inn, 2);
        let all = project(&x, 4, &w, out, inn);
        let want = naive(&x, 4, &w, out, inn);
        for (got, want) in all.iter().zip(&want) {
            assert!(
                (f64::from(*got) - want).abs() < 1e-3 * (1.0 + want.abs()),
                "{out}x{inn}"
            );
        }
        // Each row alone gives bit for bit what it gave among the others.
        for r in 0..4 {
            let alone = project(&x[r * inn..(r + 1) * inn], 1, &w, out, inn);
            assert_eq!(alone, all[r * out..(r + 1) * out], "{out}x{inn} row {r}");
        }
    }
}

#[test]
fn half_weights_sum_as_their_f32_values_do_at_every_row_count() {
    // Widths with and without a tail after the 32-wide steps.
    for (out, inn) in [(5, 9), (7, 1000), (300, 2048)] {
        let wide = data(out * inn, 5);
        let x = data(3 * inn, 6);
        let b: Vec<bf16> = wide.iter().map(|v| bf16::from_f32(*v)).collect();
        let h: Vec<f16> = wide.iter().map(|v| f16::from_f32(*v)).collect();
        let cases = [
            (
                Weights::Bf16(&b),
                b.iter().map(|v| v.to_f32()).collect::<Vec<_>>(),
            ),
            (Weights::F16(&h), h.iter().map(|v| v.to_f32()).collect()),
        ];
        for (w, as_f32) in cases {
            let all = project_stored(&x, 3, w, out, inn);
            // Read as stored, the sums are those of the same values stored as f32.
            assert_eq!(all, project(&x, 3, &as_f32, out, inn), "{w:?}");
            for r in 0..3 {
                let alone = project_stored(&x[r * inn..(r + 1) * inn], 1, w, out, inn);
                assert_eq!(alone, all[r * out..(r + 1) * out], "{out}x{inn} row {r}");
            }
        }
    }
}

/// Where the CPU has AVX-512, its tiles of products give each product the bits
/// AVX2's one-weight-row kernel gives it, in f32, bf16 and f16, at every remainder
/// of a tile and of the 32-wide steps.
#[test]
fn the_tiled_kernel_gives_the_same_bits_as_one_row_at_a_time() {
    if Weights::F32(&[]).vectorised() != Vector::Avx512 {
        eprintln!("skipped: this CPU has no AVX-512");
        return;
    }
    for (out, inn) in [(7, 64), (13, 100), (50, 2048)] {
        let wide = data(out * inn, 7);
        let b: Vec<bf16> = wide.iter().map(|v| bf16::from_f32(*v)).collect();
        let x = data(11 * inn, 8);
        let h: Vec<f16> = wide.iter().map(|v| f16::from_f32(*v)).collect();
        for w in [Weights::F32(&wide), Weights::Bf16(&b), Weights::F16(&h)] {
            // Tiles of 4 rows of x and the last one of 1, 2 or 3.
            for rows in 1..=11 {
                let x = &x[..rows * inn];
                let tiled = project_with(x, rows, w, (out, inn), Vector::Avx512);
                let one = project_with(x, rows, w, (out, inn), Vector::Avx2);
                assert_eq!(tiled, one, "{out}x{inn} {w:?} {rows} rows");
            }
        }
    }
}

/// No rows, no products (half weights take this code at every row count).
#[test]
fn no_rows_give_an_empty_product() {
    let w = data(6 * 64, 9);
    assert!(project(&[], 0, &w, 6, 64).is_empty());
}

#[test]
fn the_portable_dot_agrees_with_the_vector_one() {
    let (a, b) = (data(1000, 3), data(1000, 4));
    let want: f64 = a
        .iter()
        .zip(&b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    for got in [dot(&a, &b), dot_portable(&a, &b)] {
        assert!((f64::from(got) - want).abs() < 1e-3, "{got} {want}");
    }
}
