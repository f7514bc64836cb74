//! Times host-trainer's forward and forward+backward pass on one input, for
//! `scripts/bench/trainer-forward`, which runs transformers on the same
//! checkpoint and input and prints the ratios.
//!
//! usage: bench_forward CHECKPOINT_DIR INPUTS.safetensors RUNS THREADS
//!
//! INPUTS holds `pixel_values` (float32, patches × C·T·P·P), `input_ids`
//! (int64, 1 × tokens) and `grid_thw` (int64, 3). Prints one JSON object with
//! the median seconds of each pass. The loss for the backward pass is the
//! mean next-token cross-entropy, as in the Python side.

use std::path::Path;
use std::time::Instant;

use host_trainer::{Batch, Grid, Images, Qwen25Vl};
use tch::{Device, Kind, Tensor};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, checkpoint, inputs, runs, threads] = args.as_slice() else {
        return Err("usage: bench_forward CHECKPOINT_DIR INPUTS.safetensors RUNS THREADS".into());
    };
    let runs: usize = runs.parse()?;
    tch::set_num_threads(threads.parse()?);

    let model = Qwen25Vl::from_checkpoint(Path::new(checkpoint), Device::Cpu, Kind::Float)?;
    let tensors: std::collections::HashMap<String, Tensor> =
        Tensor::read_safetensors(inputs)?.into_iter().collect();
    let get = |name: &str| tensors.get(name).ok_or(format!("{inputs} has no {name}"));
    let pixel_values = get("pixel_values")?;
    let ids: Vec<i64> = Vec::try_from(get("input_ids")?.flatten(0, -1))?;
    let grid: Vec<i64> = Vec::try_from(get("grid_thw")?)?;
    let grids = [Grid::new(grid[0], grid[1], grid[2])];
    let input_ids = [ids.clone()];
    let batch = Batch {
        input_ids: &input_ids,
        images: Some(Images {
            pixel_values,
            grids: &grids,
        }),
    };
    let targets = Tensor::from_slice(&ids[1..]).reshape([1, -1]);

    let forward = || -> Result<(), host_trainer::Error> {
        tch::no_grad(|| model.forward(&batch)).map(|_| ())
    };
    let forward_backward = || -> Result<(), host_trainer::Error> {
        let logits = model.forward(&batch)?;
        let n = logits.size()[1];
        let loss = -logits
            .narrow(1, 0, n - 1)
            .log_softmax(-1, Kind::Float)
            .gather(-1, &targets.unsqueeze(-1), false)
            .mean(Kind::Float);
        loss.backward();
        for mut var in model.vars().trainable_variables() {
            var.zero_grad();
        }
        Ok(())
    };
    let time =
        |f: &dyn Fn() -> Result<(), host_trainer::Error>| -> Result<f64, host_trainer::Error> {
            f()?; // warm-up
            let mut times = Vec::with_capacity(runs);
            for _ in 0..runs {
                let start = Instant::now();
                f()?;
                times.push(start.elapsed().as_secs_f64());
            }
            times.sort_by(f64::total_cmp);
            Ok(times[times.len() / 2])
        };
    let forward_s = time(&forward)?;
    let forward_backward_s = time(&forward_backward)?;
    println!("{{\"forward_s\": {forward_s}, \"forward_backward_s\": {forward_backward_s}}}");
    Ok(())
}
