"""Syntax: the program as an immutable libcst original plus edits, and its size."""

from shrinkgpu.syntax.edits import Edit, EditOp, Stmt
from shrinkgpu.syntax.facts import CutRecord, Facts, LoadRecord, ParseRecord, SavedObject, SizeRecord, StateRecord
from shrinkgpu.syntax.program import Candidate, Program
from shrinkgpu.syntax.tokens import count_tokens

__all__ = ["Candidate", "CutRecord", "Edit", "EditOp", "Facts", "LoadRecord", "ParseRecord", "Program", "SavedObject",
           "SizeRecord", "StateRecord", "Stmt", "count_tokens"]
