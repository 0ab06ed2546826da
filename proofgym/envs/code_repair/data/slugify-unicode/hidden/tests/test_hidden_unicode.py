# PROOFGYM-CANARY slugify-unicode 7f3c9b2e
from sluglib import slugify, unique_slug


def test_scandinavian_and_czech_letters():
    assert slugify("Ångström") == "angstrom"
    assert slugify("Dvořák: Symphony No. 9") == "dvorak-symphony-no-9"


def test_uppercase_accented():
    assert slugify("ÉCOLE ÉTÉ") == "ecole-ete"


def test_vietnamese_stacked_marks():
    assert slugify("Phở bò") == "pho-bo"


def test_fullwidth_latin_letters():
    assert slugify("Ｆｕｌｌ　Ｗｉｄｔｈ") == "full-width"
    assert slugify("Ｃａｆé ２４") == "cafe-24"


def test_max_length_counts_transliterated_letters():
    assert slugify("Ñandú ñandú", max_length=5) == "nandu"


def test_unique_slug_with_accents():
    assert unique_slug("Café", {"cafe"}) == "cafe-2"


def test_plain_ascii_unchanged():
    assert slugify("Already-a-slug") == "already-a-slug"
