"""ms-swift's Qwen2.5-VL chat template for models with their own vocabulary.

ms-swift's `qwen2_5_vl` template expands each image into Qwen's image-pad
token by its id in Qwen's vocabulary (151655). Models made by
`btl-train init` (btl-mini, btl-tiny) keep the architecture but use a
small BPE of their own, where `<|image_pad|>` has another id, so the stock
template leaves the image unexpanded ("Image features and image tokens do
not match"). This plugin registers `btl_qwen2_5_vl`, the same template with
the image and video pad ids read from the checkpoint's tokenizer. A real
Qwen2.5-VL or BTL-UI checkpoint needs only the stock template.

    swift rlhf ... --external_plugins scripts/ms-swift/btl_template.py --template btl_qwen2_5_vl
"""

from swift.template import register_template
from swift.template.templates.qwen import Qwen2_5VLTemplate, QwenTemplateMeta


class BtlQwen25VLTemplate(Qwen2_5VLTemplate):
    def init_processor(self, processor):
        super().init_processor(processor)
        if processor is None:
            return
        tokenizer = getattr(processor, "tokenizer", processor)
        ids = {token: tokenizer.convert_tokens_to_ids(token) for token in ("<|image_pad|>", "<|video_pad|>")}
        unknown = [token for token, i in ids.items() if i is None or i == tokenizer.unk_token_id]
        if unknown:
            raise ValueError(f"the checkpoint's tokenizer has no {', '.join(unknown)}")
        self.image_token_id = ids["<|image_pad|>"]
        self.video_token_id = ids["<|video_pad|>"]


register_template(QwenTemplateMeta("btl_qwen2_5_vl", template_cls=BtlQwen25VLTemplate))
