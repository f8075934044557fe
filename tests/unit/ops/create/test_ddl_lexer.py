"""icectl/ops/create/ddl_lexer.py: the DDL's tokens, their 0-based offsets and the 1-based positions in errors."""

from __future__ import annotations

import pytest

from icectl.errors import UsageError
from icectl.ops.create.ddl_lexer import Lexer, Token


def _all(text: str) -> list[tuple[str, str, int]]:
    lexer, out = Lexer(text, "schema"), []
    while (token := lexer.next()).kind != "end":
        out.append((token.kind, token.value, token.pos))
    return out


def test_kinds_values_and_offsets() -> None:
    assert _all("id long, `my col` map<string,decimal(9, 2)>") == [
        ("ident", "id", 0), ("ident", "long", 3), ("punct", ",", 7), ("quoted", "my col", 9),
        ("ident", "map", 18), ("punct", "<", 21), ("ident", "string", 22), ("punct", ",", 28),
        ("ident", "decimal", 29), ("punct", "(", 36), ("number", "9", 37), ("punct", ",", 38),
        ("number", "2", 40), ("punct", ")", 41), ("punct", ">", 42)]


@pytest.mark.parametrize(("text", "value"), [
    ("-12", "-12"), ("+3.5", "+3.5"), (".5", ".5"), ("1e10", "1e10"), ("6.02E-23", "6.02E-23"), ("7.", "7.")])
def test_numbers_keep_their_text(text: str, value: str) -> None:
    assert _all(text) == [("number", value, 0)]


def test_strings_take_doubled_quotes_and_backslash_escapes_names_only_doubled_backticks() -> None:
    assert _all(r"'it''s' 'a\tb\\c\'d' " + '"q""x"') == [
        ("string", "it's", 0), ("string", "a\tb\\c'd", 8), ("string", 'q"x', 21)]
    assert _all(r"`a``b\n`") == [("quoted", "a`b\\n", 0)]  # no escapes in a name


def test_hex_literal_in_either_case_and_x_alone_is_a_name() -> None:
    assert _all("X'0A0b' x'ff' x") == [("hex", "0A0b", 0), ("hex", "ff", 8), ("ident", "x", 14)]


def test_raw_text_after_a_peek_starts_where_the_peeked_token_did() -> None:
    lexer = Lexer("geometry( EPSG:4326 ), next", "schema")
    assert lexer.next().value == "geometry" and lexer.accept_punct("(")
    assert lexer.peek().value == "EPSG"  # peeked, then read raw from the same place
    raw = lexer.raw_until(",)")
    assert (raw.kind, raw.value, raw.pos) == ("raw", "EPSG:4326", 10)
    assert lexer.next().is_punct(")") and lexer.next().is_punct(",") and lexer.next().is_word("NEXT", "next")
    quoted = Lexer("'OGC:CRS84')", "schema").raw_until(")")
    assert quoted.value == "OGC:CRS84"


def test_errors_name_the_one_based_character() -> None:
    with pytest.raises(UsageError, match=r"bad schema at character 4 \('@'\): unexpected character"):
        _all("a, @")
    with pytest.raises(UsageError, match=r"bad schema at character 7 .*unterminated quoted string"):
        _all("a int 'open")
    with pytest.raises(UsageError, match=r"at character 1 .*unterminated quoted name"):
        _all("`open")
    lexer = Lexer("a", "partition spec")
    lexer.next()
    with pytest.raises(UsageError, match=r"bad partition spec at character 2 \(end of text\): expected '\('"):
        lexer.expect_punct("(", "expected '('")


def test_word_and_punct_checks() -> None:
    assert Token("ident", "NOT", "NOT", 0).is_word("not")
    assert not Token("quoted", "`not`", "not", 0).is_word("not")  # a quoted name is never a keyword
    assert not Token("string", "','", ",", 0).is_punct(",")
