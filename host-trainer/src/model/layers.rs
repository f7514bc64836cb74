//! Building blocks shared by the vision tower and the text model: linear
//! layers, RMSNorm, the SwiGLU MLP and the rotary helpers.
//!
//! Precision follows transformers: RMSNorm and the vision rotary run in at
//! least float32 whatever the weights' dtype (bf16 on a GPU). transformers
//! writes that as "in float32", which would also *lower* a float64 model;
//! here it is "in float32 or wider", so a float64 model stays float64 end to
//! end (the golden-gradient tests rely on it; the reference script patches
//! transformers the same way).

use tch::{Kind, Tensor, nn};

use crate::error::Result;
use crate::lora::{Adapter, Lora};

/// The dtype that normalisation and rotary arithmetic run in for a model of `kind`.
pub(crate) fn compute_kind(kind: Kind) -> Kind {
    match kind {
        Kind::Double => Kind::Double,
        _ => Kind::Float,
    }
}

/// `y = x Wᵀ + b`, with the weight as `(out, in)` like torch's `nn.Linear`,
/// plus a LoRA update when the projection is adapted.
pub(crate) struct Linear {
    weight: Tensor,
    bias: Option<Tensor>,
    adapter: Option<Adapter>,
}

impl Linear {
    pub(crate) fn new(p: &nn::Path, in_dim: i64, out_dim: i64, bias: bool) -> Result<Self> {
        let weight = p.f_zeros("weight", &[out_dim, in_dim])?;
        let bias = if bias {
            Some(p.f_zeros("bias", &[out_dim])?)
        } else {
            None
        };
        Ok(Self {
            weight,
            bias,
            adapter: None,
        })
    }

    /// A projection named `module` in the checkpoint, adapted if `lora` targets it.
    pub(crate) fn adapted(
        p: &nn::Path,
        module: &str,
        (in_dim, out_dim): (i64, i64),
        bias: bool,
        lora: &mut Option<Lora>,
    ) -> Result<Self> {
        let mut linear = Self::new(p, in_dim, out_dim, bias)?;
        if let Some(lora) = lora {
            linear.adapter = lora.adapter(module, in_dim, out_dim)?;
        }
        Ok(linear)
    }

    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let base = x.f_linear(&self.weight, self.bias.as_ref())?;
        match &self.adapter {
            Some(adapter) => adapter.apply(x, base),
            None => Ok(base),
        }
    }
}

/// Root-mean-square normalisation with a learned scale.
pub(crate) struct RmsNorm {
    weight: Tensor,
    eps: f64,
}

impl RmsNorm {
    pub(crate) fn new(p: &nn::Path, dim: i64, eps: f64) -> Result<Self> {
        Ok(Self {
            weight: p.f_zeros("weight", &[dim])?,
            eps,
        })
    }

    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let kind = x.kind();
        let wide = x.f_to_kind(compute_kind(kind))?;
        let variance = wide
            .f_pow_tensor_scalar(2)?
            .f_mean_dim(-1, true, None::<Kind>)?;
        let normed = wide.f_mul(&variance.f_add_scalar(self.eps)?.f_rsqrt()?)?;
        // The scale multiplies after the cast back, as in transformers.
        Ok(self.weight.f_mul(&normed.f_to_kind(kind)?)?)
    }
}

/// SwiGLU: `down(silu(gate(x)) · up(x))`; biased in the vision tower only.
pub(crate) struct Mlp {
    gate_proj: Linear,
    up_proj: Linear,
    down_proj: Linear,
}

impl Mlp {
    pub(crate) fn new(p: &nn::Path, dim: i64, hidden: i64, bias: bool) -> Result<Self> {
        Self::adapted(p, "", dim, hidden, bias, &mut None)
    }

    /// An MLP whose projections (named `{module}.gate_proj`, …) may be adapted.
    pub(crate) fn adapted(
        p: &nn::Path,
        module: &str,
        dim: i64,
        hidden: i64,
        bias: bool,
        lora: &mut Option<Lora>,
    ) -> Result<Self> {
        let mut proj = |name: &str, dims| {
            Linear::adapted(&(p / name), &format!("{module}.{name}"), dims, bias, lora)
        };
        Ok(Self {
            gate_proj: proj("gate_proj", (dim, hidden))?,
            up_proj: proj("up_proj", (dim, hidden))?,
            down_proj: proj("down_proj", (hidden, dim))?,
        })
    }

    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let gate = self.gate_proj.forward(x)?.f_silu()?;
        self.down_proj
            .forward(&gate.f_mul(&self.up_proj.forward(x)?)?)
    }
}

/// `(x₁, x₂) → (−x₂, x₁)` over the last dimension's two halves.
fn rotate_half(x: &Tensor) -> Result<Tensor> {
    let half = x.size().last().copied().unwrap_or(0) / 2;
    let x1 = x.f_narrow(-1, 0, half)?;
    let x2 = x.f_narrow(-1, half, half)?;
    Ok(Tensor::f_cat(&[x2.f_neg()?, x1], -1)?)
}

/// `x·cos + rotate_half(x)·sin`; `cos` and `sin` broadcast against `x`.
pub(crate) fn apply_rotary(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    Ok(x.f_mul(cos)?.f_add(&rotate_half(x)?.f_mul(sin)?)?)
}

/// Inverse frequencies `1 / θ^(2i/dim)` for `i < dim/2`, computed in float32
/// with the same operations as transformers so the rotary tables agree bit for bit.
pub(crate) fn inverse_frequencies(theta: f64, dim: i64, device: tch::Device) -> Result<Tensor> {
    let exponent =
        Tensor::f_arange_start_step(0, dim, 2, (Kind::Float, device))?.f_div_scalar(dim as f64)?;
    Ok(Tensor::f_pow_scalar(theta, &exponent)?.f_reciprocal()?)
}
