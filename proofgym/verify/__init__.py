"""Verification: verdicts, rubrics, built-in graders, the LLM judge, and re-grading."""

from proofgym.core import Verdict, grade
from proofgym.verify.answers import (
    HedgedAnswer,
    MathCheckStarved,
    boxed_contents,
    extract_final_answer,
    math_equivalent,
    normalize_text,
)
from proofgym.verify.graders import (
    GRADERS,
    AnswerGrader,
    ExactMatch,
    GraderSpecError,
    MathMatch,
    NormalizedMatch,
    NumericMatch,
    RegexMatch,
    make_grader,
)
from proofgym.verify.judge import JUDGE_PROMPTS, JudgeError, JudgeTimeout, LLMJudge
from proofgym.verify.qa import QATask
from proofgym.verify.rubric import Component, MultiRubric, Rubric, score_all

__all__ = [
    "GRADERS",
    "JUDGE_PROMPTS",
    "AnswerGrader",
    "Component",
    "ExactMatch",
    "GraderSpecError",
    "HedgedAnswer",
    "JudgeError",
    "JudgeTimeout",
    "LLMJudge",
    "MathCheckStarved",
    "MathMatch",
    "MultiRubric",
    "NormalizedMatch",
    "NumericMatch",
    "QATask",
    "RegexMatch",
    "Rubric",
    "Verdict",
    "boxed_contents",
    "extract_final_answer",
    "grade",
    "make_grader",
    "math_equivalent",
    "normalize_text",
    "score_all",
]
