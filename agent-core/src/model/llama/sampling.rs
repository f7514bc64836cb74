//! Choosing each answer token, under the BTL grammar when there is one.
//!
//! Checking a grammar against every vocabulary entry costs as much as the
//! vocabulary is long: at Qwen's 151,936 entries that is most of a decoded
//! token's time. So the grammar is asked about the token the unconstrained
//! sampler picked, and applied to the whole vocabulary only when it refuses
//! that one, as llama.cpp's own `common_sampler` does. Greedy decoding
//! picks exactly the tokens of grammar-first decoding: when the
//! unconstrained best token is admitted it is also the best admitted one.
//! Under temperature alone the answers follow exactly the constrained
//! distribution (accepting an admitted token with its probability, and
//! otherwise drawing from the admitted ones renormalised, sums to the
//! renormalised probability). With top-k or top-p the first draw is cut
//! from the unconstrained candidates and a redraw from the admitted ones,
//! so the distribution can differ from grammar-first's: llama.cpp's
//! semantics, and every answer still parses.

use super::super::grammar::GrammarCheck;
use super::{GenerateError, LlamaConfig};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;

/// Picks the answer's tokens one by one: the configured chain (greedy, or
/// top-k, top-p, temperature and a seeded draw), checked against the
/// grammar as [`GrammarCheck`] says.
pub(super) struct TokenSampler {
    chain: LlamaSampler,
    grammar: Option<(LlamaSampler, GrammarCheck)>,
    /// Unconstrained choices the grammar refused so far.
    pub(super) refusals: u32,
}

impl TokenSampler {
    pub(super) fn new(
        config: &LlamaConfig,
        model: &LlamaModel,
        seed: u64,
        grammar: Option<&str>,
    ) -> Result<Self, GenerateError> {
        let grammar = grammar
            .map(|g| {
                LlamaSampler::grammar(model, g, "root")
                    .map(|s| (s, config.grammar_check))
                    .map_err(|e| GenerateError::Grammar(e.to_string()))
            })
            .transpose()?;
        Ok(Self {
            chain: chain(config, seed),
            grammar,
            refusals: 0,
        })
    }

    /// The next token from the logits of the context's last position; every
    /// sampler is told it was chosen.
    pub(super) fn sample(&mut self, ctx: &LlamaContext) -> Result<LlamaToken, GenerateError> {
        // Overflowed scores would still pick a token (greedy takes the
        // first NaN), or leave a grammar nothing to admit: either way the
        // answer would not be the model's.
        if ctx
            .get_logits_ith(-1)
            .iter()
            .any(|l| l.is_nan() || *l == f32::INFINITY)
        {
            return Err(GenerateError::NotFinite);
        }
        let Some((grammar, check)) = &mut self.grammar else {
            return Ok(self.chain.sample(ctx, -1));
        };
        let token = match check {
            GrammarCheck::First => pick(ctx, &mut [&mut *grammar, &mut self.chain])?,
            GrammarCheck::Lazy => {
                let token = pick(ctx, &mut [&mut self.chain])?;
                if admits(grammar, token) {
                    token
                } else {
                    self.refusals += 1;
                    pick(ctx, &mut [&mut *grammar, &mut self.chain])?
                }
            }
        };
        grammar.accept(token);
        self.chain.accept(token);
        Ok(token)
    }
}

/// The unconstrained chain the configuration asks for.
fn chain(config: &LlamaConfig, seed: u64) -> LlamaSampler {
    let c = config;
    if c.temperature <= 0.0 {
        return LlamaSampler::greedy();
    }
    LlamaSampler::chain_simple([
        LlamaSampler::top_k(c.top_k),
        LlamaSampler::top_p(c.top_p, 1),
        LlamaSampler::temp(c.temperature),
        // llama.cpp seeds are 32-bit; fold the high half in so seeds
        // differing only there still differ.
        LlamaSampler::dist((seed ^ (seed >> 32)) as u32),
    ])
}

/// The token `samplers`, applied in order to the last position's logits,
/// select. Nothing is accepted yet.
fn pick(
    ctx: &LlamaContext,
    samplers: &mut [&mut LlamaSampler],
) -> Result<LlamaToken, GenerateError> {
    let mut candidates = ctx.token_data_array_ith(-1);
    for sampler in samplers {
        sampler.apply(&mut candidates);
    }
    // A grammar that admits nothing leaves every logit at -inf, and the
    // chain still selects one of them.
    candidates
        .selected
        .and_then(|i| candidates.data.get(i))
        .filter(|d| d.logit() > f32::NEG_INFINITY)
        .map(LlamaTokenData::id)
        .ok_or_else(|| GenerateError::Decode("the grammar admits no token here".to_owned()))
}

/// Whether the grammar, in its current state, admits `token` next.
pub(super) fn admits(grammar: &mut LlamaSampler, token: LlamaToken) -> bool {
    let mut one = LlamaTokenDataArray::new(vec![LlamaTokenData::new(token, 0.0, 0.0)], false);
    grammar.apply(&mut one);
    one.data[0].logit() > f32::NEG_INFINITY
}
