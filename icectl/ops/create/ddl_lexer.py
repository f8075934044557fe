"""The tokens of ``icectl create``'s DDL (:mod:`icectl.ops.create.ddl`): names, `quoted names`,
numbers, 'strings' (doubled quotes and backslash escapes), X'hex', punctuation, and raw text up
to a stop character (CRS names such as ``EPSG:4326``). Errors name the 1-based character position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from icectl.errors import UsageError

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_PUNCT = ",()<>[]:."
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0"}


@dataclass(frozen=True)
class Token:
    kind: str  # ident, quoted (a `backticked` name), number, string, hex, punct, raw, end
    text: str  # as written, for messages
    value: str  # the name, the string's content, the number's text, the punctuation
    pos: int  # 0-based offset of the first character

    def is_word(self, *words: str) -> bool:
        return self.kind == "ident" and self.value.lower() in words

    def is_punct(self, ch: str) -> bool:
        return self.kind == "punct" and self.value == ch


class Lexer:
    """Tokens on demand (one of look-ahead), so CRS text can be read raw."""

    def __init__(self, text: str, what: str) -> None:
        self.text = text
        self.what = what
        self.pos = 0
        self._peeked: Token | None = None
        self.plain_timestamps = 0  # `timestamp` without "with/without time zone": see schema_warnings
        self.plain_timestamp_columns: list[str] = []

    def error(self, token: Token, problem: str) -> UsageError:
        shown = "end of text" if token.kind == "end" else repr(token.text)
        return UsageError(f"bad {self.what} at character {token.pos + 1} ({shown}): {problem}")

    def peek(self) -> Token:
        if self._peeked is None:
            self._peeked = self._lex()
        return self._peeked

    def next(self) -> Token:
        token = self.peek()
        self._peeked = None
        return token

    def accept_punct(self, ch: str) -> bool:
        if self.peek().is_punct(ch):
            self.next()
            return True
        return False

    def expect_punct(self, ch: str, problem: str) -> Token:
        token = self.next()
        if not token.is_punct(ch):
            raise self.error(token, problem)
        return token

    def accept_word(self, *words: str) -> Token | None:
        return self.next() if self.peek().is_word(*words) else None

    def raw_until(self, stops: str) -> Token:
        """The text up to (not including) the first of ``stops``; for CRS names like ``EPSG:4326``."""
        if self._peeked is not None:
            self.pos, self._peeked = self._peeked.pos, None
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in stops:
            self.pos += 1
        raw = self.text[start:self.pos]
        value = raw.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        return Token("raw", raw, value, start + len(raw) - len(raw.lstrip()))

    def _lex(self) -> Token:
        text, n = self.text, len(self.text)
        while self.pos < n and text[self.pos].isspace():
            self.pos += 1
        start = self.pos
        if start >= n:
            return Token("end", "", "", n)
        ch = text[start]
        if ch in "xX" and start + 1 < n and text[start + 1] == "'":
            self.pos += 1
            s = self._quoted("'", start)
            return Token("hex", text[start:self.pos], s.value, start)
        if ch == "`":
            s = self._quoted("`", start)
            return Token("quoted", s.text, s.value, start)
        if ch in "'\"":
            return self._quoted(ch, start)
        if m := _IDENT.match(text, start):
            self.pos = m.end()
            return Token("ident", m.group(), m.group(), start)
        if m := _NUMBER.match(text, start):
            self.pos = m.end()
            return Token("number", m.group(), m.group(), start)
        self.pos += 1
        if ch in _PUNCT:
            return Token("punct", ch, ch, start)
        raise self.error(Token("punct", ch, ch, start), "unexpected character")

    def _quoted(self, quote: str, start: int) -> Token:
        # Strings and `names`: a doubled quote stands for itself; strings also take \ escapes.
        text, i, out = self.text, self.pos + 1, []
        while i < len(text):
            ch = text[i]
            if ch == quote:
                if i + 1 < len(text) and text[i + 1] == quote:
                    out.append(quote)
                    i += 2
                    continue
                self.pos = i + 1
                return Token("string", text[start:self.pos], "".join(out), start)
            if ch == "\\" and quote != "`" and i + 1 < len(text):
                out.append(_ESCAPES.get(text[i + 1], text[i + 1]))
                i += 2
                continue
            out.append(ch)
            i += 1
        what = "name" if quote == "`" else "string"
        raise self.error(Token("punct", text[start:start + 20], "", start), f"unterminated quoted {what}")
