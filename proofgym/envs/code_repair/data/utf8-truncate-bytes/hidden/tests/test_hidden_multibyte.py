# PROOFGYM-CANARY utf8-truncate-bytes 7f3c9b2e
from dbtext import Column, byte_length, fit_record, truncate_bytes

SAMPLES = ["héllo wörld", "日本語のテキスト", "emoji 🎉🎉 party", "Ελληνικά κείμενα", "mixed ascii ✓ and 中文"]


def test_never_exceeds_limit():
    for text in SAMPLES:
        for limit in range(0, byte_length(text) + 2):
            assert byte_length(truncate_bytes(text, limit)) <= limit


def test_result_is_longest_prefix():
    for text in SAMPLES:
        for limit in range(0, byte_length(text) + 2):
            result = truncate_bytes(text, limit)
            assert text.startswith(result)
            longer = text[: len(result) + 1]
            assert longer == result or byte_length(longer) > limit


def test_cut_inside_a_character():
    assert truncate_bytes("日本語", 8) == "日本"
    assert truncate_bytes("🎉🎉", 7) == "🎉"


def test_ellipsis_with_multibyte_text():
    result = truncate_bytes("Ελληνικά κείμενα", 12, "…")
    assert result == "Ελλη…"
    assert byte_length(result) <= 12


def test_fit_record_with_unicode():
    record = {"title": "Überraschung für alle", "tags": "äöü"}
    fitted = fit_record(record, [Column("title", 10, "…"), Column("tags", 5)])
    assert fitted == {"title": "Überra…", "tags": "äö"}
    assert all(byte_length(v) <= 10 for v in fitted.values())


def test_exact_fit_unchanged():
    assert truncate_bytes("日本", 6) == "日本"
