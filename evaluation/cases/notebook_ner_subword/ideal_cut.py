import torch

# collate(): input_ids were cut to max_len (78 pieces + [CLS]/[SEP] = 80), labels to
# max_len pieces + 2 = 82, for the one sentence that subword regularisation re-split to 84
attention_mask = torch.ones(32, 80, dtype=torch.bool)    # input_ids != PAD
labels = torch.zeros(32, 82, dtype=torch.long)            # pad_to(labels, 0)
torch.where(attention_mask, labels, -100)
