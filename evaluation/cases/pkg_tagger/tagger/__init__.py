"""Tiny transformer NER tagger."""
from .models import TaggerConfig, TransformerTagger
from .data import Vocab, TaggingDataset, make_loader, synthetic_corpus
from .metrics import span_f1

__all__ = [
    "TaggerConfig", "TransformerTagger", "Vocab", "TaggingDataset", "make_loader",
    "synthetic_corpus", "span_f1",
]
__version__ = "0.3.1"
