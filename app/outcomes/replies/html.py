"""The visible text of an HTML body, for a reply sent without a text/plain part."""

import re
from html.parser import HTMLParser


class _HtmlText(HTMLParser):
    """The visible text of an HTML part, for a reply sent without a text/plain one."""

    _BLOCKS = {"p", "div", "br", "tr", "li", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6"}
    _HIDDEN = {"style", "script", "head", "title"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.hidden = 0
        self.quoted = 0

    def handle_starttag(self, tag, attrs):
        if tag in self._HIDDEN:
            self.hidden += 1
        elif tag == "blockquote":  # the quoted history, in HTML mail clients
            self.quoted += 1
        if tag in self._BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in self._HIDDEN:
            self.hidden = max(0, self.hidden - 1)
        elif tag == "blockquote":
            self.quoted = max(0, self.quoted - 1)
        if tag in self._BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data):
        if not self.hidden and not self.quoted:
            self.parts.append(data)


def html_text(html: str) -> str:
    """The text a reader sees, blockquotes (the quoted history of HTML clients) left out, a line per block."""
    parser = _HtmlText()
    parser.feed(html)
    parser.close()
    return re.sub(r"\n{3,}", "\n\n", "".join(parser.parts))
