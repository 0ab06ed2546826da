"""Verification: verdicts and graders."""

from proofgym.core import Verdict, grade
from proofgym.verify.answers import (
    HedgedAnswer,
    boxed_contents,
    extract_final_answer,
    math_equivalent,
    normalize_text,
)

__all__ = ["HedgedAnswer", "Verdict", "boxed_contents", "extract_final_answer", "grade",
           "math_equivalent", "normalize_text"]
