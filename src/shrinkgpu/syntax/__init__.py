"""Syntax: the program as an immutable libcst original plus edits, and its size."""

from shrinkgpu.syntax.program import Candidate, CutRecord, Edit, Facts, LoadRecord, ParseRecord, Program, SavedObject, Stmt
from shrinkgpu.syntax.tokens import count_tokens

__all__ = ["Candidate", "CutRecord", "Edit", "Facts", "LoadRecord", "ParseRecord", "Program", "SavedObject", "Stmt", "count_tokens"]
