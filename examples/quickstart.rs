//! Write an operator as a tensor expression, check it, key it, and run it on
//! the reference interpreter.
//!
//! `cargo run --example quickstart`

use tessera::te::{self, DType, HostTensor};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // out[i, j] = relu(Σk x[i, k] · w[j, k] + b[j]): a dense layer.
    let (m, n, k) = (4, 3, 5);
    let x = te::placeholder("x", &[m, k], DType::F32);
    let w = te::placeholder("w", &[n, k], DType::F32);
    let b = te::placeholder("b", &[n], DType::F32);
    let rk = te::reduce_axis(k, "k");
    let product = te::compute("product", &[m, n], |ix| {
        te::sum(x.at([&ix[0], &rk]) * w.at([&ix[1], &rk]), [&rk])
    });
    let out = te::compute("out", &[m, n], |ix| {
        te::max(product.at([&ix[0], &ix[1]]) + b.at([&ix[1]]), 0.0)
    });

    let dag = te::ComputeDag::new(&[x, w, b], &[out])?.with_label("my_dense[4x3x5]");
    println!("{dag}");
    println!("workload key: {}", dag.workload_key());
    println!("flops: {}", dag.flop_count());

    let inputs: Vec<HostTensor> = dag
        .inputs()
        .iter()
        .enumerate()
        .map(|(seed, t)| {
            let shape: Vec<usize> = t.shape().iter().map(|&d| d as usize).collect();
            HostTensor::random(&shape, DType::F32, seed as u64)
        })
        .collect();
    let result = te::evaluate(&dag, &inputs)?;
    println!("out = {:?}", result[0].as_f32().unwrap_or_default());
    Ok(())
}
