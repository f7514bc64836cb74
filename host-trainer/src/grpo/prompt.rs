//! Turning a sample's messages into model input ids, and completions back
//! into text.
//!
//! The prompt is Qwen2-VL's chat template rendered for a system and a user
//! message followed by the generation prompt — written out here because the
//! model family is fixed and the template is short:
//!
//! ```text
//! <|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n
//! ```
//!
//! A conversation without a system message gets Qwen's default one, as the
//! template does. The official samples mark the screenshot with `<image>`;
//! it becomes `<|vision_start|><|image_pad|><|vision_end|>`, and the single
//! `<|image_pad|>` is then repeated once per merged image patch, as
//! `Qwen2_5_VLProcessor` does.

use std::path::Path;

use agent_core::sample::Message;
use tokenizers::Tokenizer;

use crate::error::{Error, Result};

const DEFAULT_SYSTEM: &str = "You are a helpful assistant.";
const IMAGE_MARK: &str = "<image>";
const VISION: &str = "<|vision_start|><|image_pad|><|vision_end|>";

/// The chat-template text of `messages` with the assistant's turn opened.
pub fn render_chat(messages: &[Message]) -> String {
    let mut out = String::new();
    if messages.first().is_none_or(|m| m.role != "system") {
        out.push_str(&format!("<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n"));
    }
    for m in messages {
        out.push_str(&format!(
            "<|im_start|>{}\n{}<|im_end|>\n",
            m.role,
            m.content.replace(IMAGE_MARK, VISION)
        ));
    }
    out.push_str("<|im_start|>assistant\n");
    out
}

/// A text's token ids, each with the byte range of the text it stands for.
pub struct EncodedText {
    /// Token ids.
    pub ids: Vec<i64>,
    /// `(start, end)` byte offsets of each id's piece of the text.
    pub spans: Vec<(usize, usize)>,
}

/// A `tokenizer.json` with the Qwen special tokens the trainer needs.
pub struct PromptTokenizer {
    tokenizer: Tokenizer,
    image_pad: i64,
    im_end: i64,
    endoftext: i64,
}

impl PromptTokenizer {
    pub fn from_file(path: &Path) -> Result<Self> {
        let tokenizer = Tokenizer::from_file(path).map_err(|e| Error::Checkpoint {
            path: path.to_owned(),
            message: format!("not a tokenizer.json: {e}"),
        })?;
        let id = |token: &str| -> Result<i64> {
            tokenizer
                .token_to_id(token)
                .map(i64::from)
                .ok_or_else(|| Error::Checkpoint {
                    path: path.to_owned(),
                    message: format!("the tokenizer has no {token} token (not a Qwen2 tokenizer?)"),
                })
        };
        Ok(Self {
            image_pad: id("<|image_pad|>")?,
            im_end: id("<|im_end|>")?,
            endoftext: id("<|endoftext|>")?,
            tokenizer,
        })
    }

    /// Ids of the rendered prompt, with `image_tokens` image-pad ids where the
    /// conversation's image is (the prompt must hold exactly one image mark
    /// when `image_tokens` > 0, and none otherwise).
    pub fn prompt_ids(&self, messages: &[Message], image_tokens: usize) -> Result<Vec<i64>> {
        let text = render_chat(messages);
        let encoding = self
            .tokenizer
            .encode(text.as_str(), false)
            .map_err(|e| Error::Input(format!("tokenizing the prompt: {e}")))?;
        let mut ids = Vec::with_capacity(encoding.len() + image_tokens);
        let mut pads = 0;
        for &id in encoding.get_ids() {
            let id = i64::from(id);
            if id == self.image_pad {
                pads += 1;
                ids.extend(std::iter::repeat_n(id, image_tokens));
            } else {
                ids.push(id);
            }
        }
        let wanted = usize::from(image_tokens > 0);
        if pads != wanted {
            return Err(Error::Input(format!(
                "the prompt has {pads} image mark(s) ({IMAGE_MARK}); {} expected",
                wanted
            )));
        }
        Ok(ids)
    }

    /// Text of generated ids, special tokens dropped.
    pub fn decode(&self, ids: &[i64]) -> Result<String> {
        let ids: Vec<u32> = ids
            .iter()
            .map(|&id| u32::try_from(id))
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| Error::Input(format!("negative token id in {ids:?}")))?;
        self.tokenizer
            .decode(&ids, true)
            .map_err(|e| Error::Input(format!("decoding a completion: {e}")))
    }

    /// Ids that end a completion (`<|im_end|>`, `<|endoftext|>`).
    pub fn stop_ids(&self) -> Vec<i64> {
        vec![self.im_end, self.endoftext]
    }

    /// The `tokenizer.json` itself.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The id that pads finished completions.
    pub fn pad_id(&self) -> i64 {
        self.endoftext
    }

    /// Ids of plain text (no template), for toy tasks and tests.
    pub fn encode_text(&self, text: &str) -> Result<Vec<i64>> {
        Ok(self.encode_text_spans(text)?.ids)
    }

    /// Ids of plain text, each with the byte range of `text` it stands for.
    pub fn encode_text_spans(&self, text: &str) -> Result<EncodedText> {
        let encoding = self
            .tokenizer
            .encode(text, false)
            .map_err(|e| Error::Input(format!("tokenizing: {e}")))?;
        Ok(EncodedText {
            ids: encoding.get_ids().iter().map(|&id| i64::from(id)).collect(),
            spans: encoding.get_offsets().to_vec(),
        })
    }
}
