#!/usr/bin/env python3
"""What the headless browser made of a report, checked with Python's standard library alone.

    browser_checks.py painted PNG                    the screenshot is not blank: a good share of
                                                     it is painted, in the chart's colours
    browser_checks.py curves DOM STAGES CURVES       the chart has STAGES panels and CURVES curves,
                                                     none of them two on one stage
    browser_checks.py visible DOM TEXT               TEXT is shown as text of the page or the chart,
                                                     not only in a tooltip
    browser_checks.py inert DOM TITLE TEXT           the page's title is still TITLE, it holds no
                                                     script and nothing a script would have added,
                                                     and TEXT (markup from the results) is text

DOM is what `chromium --dump-dom` printed: the document after every script that could run ran.
Each check prints why it fails and exits 1.
"""

import html.parser
import struct
import sys
import zlib

# The chart's colours (render_chart.cpp): a trial that succeeded, and one out of memory.
SUCCEEDED_BLUE = (0x09, 0x69, 0xDA)
OOM_RED = (0xCF, 0x22, 0x2E)


def fail(message):
    print(message)
    sys.exit(1)


def paeth(left, up, up_left):
    estimate = left + up - up_left
    distances = (abs(estimate - left), abs(estimate - up), abs(estimate - up_left))
    if distances[0] <= distances[1] and distances[0] <= distances[2]:
        return left
    return up if distances[1] <= distances[2] else up_left


def unfilter(kind, line, previous, stride):
    out = bytearray(line)
    for i, value in enumerate(line):
        left = out[i - stride] if i >= stride else 0
        up = previous[i]
        up_left = previous[i - stride] if i >= stride else 0
        if kind == 1:
            out[i] = (value + left) & 0xFF
        elif kind == 2:
            out[i] = (value + up) & 0xFF
        elif kind == 3:
            out[i] = (value + (left + up) // 2) & 0xFF
        elif kind == 4:
            out[i] = (value + paeth(left, up, up_left)) & 0xFF
    return out


def pixels(path):
    """The RGB pixels of an 8-bit RGB or RGBA PNG, row by row."""
    with open(path, "rb") as handle:
        data = handle.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path} is not a PNG")
    at, compressed, header = 8, b"", None
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        chunk = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            compressed += chunk
        at += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        fail(f"{path}: a PNG of depth {depth}, colour type {colour}, interlace {interlace} "
             "is not read here")
    channels = 3 if colour == 2 else 4
    stride = width * channels
    raw = zlib.decompress(compressed)
    previous = bytearray(stride)
    rows = []
    for y in range(height):
        start = y * (stride + 1)
        line = unfilter(raw[start], raw[start + 1:start + 1 + stride], previous, channels)
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, channels)])
        previous = line
    return rows


def near(pixel, colour, tolerance=40):
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, colour))


def painted(path):
    rows = pixels(path)
    total = sum(len(row) for row in rows)
    counts = {}
    for row in rows:
        for pixel in row:
            counts[pixel] = counts.get(pixel, 0) + 1
    background, background_count = max(counts.items(), key=lambda item: item[1])
    share = 1 - background_count / total
    if share < 0.02:
        fail(f"{path}: only {share:.2%} of the pixels differ from the background {background}")
    for name, colour in (("the succeeded trials' blue", SUCCEEDED_BLUE), ("the OOM red", OOM_RED)):
        found = sum(count for pixel, count in counts.items() if near(pixel, colour))
        if found < 20:
            fail(f"{path}: {found} pixels in {name}: the chart was not drawn")
    print(f"{path}: {share:.1%} painted, {len(counts)} colours")


class Document(html.parser.HTMLParser):
    """The elements and texts of a dumped DOM."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.open = []
        self.elements = []  # (tag, attributes)
        self.texts = []  # (text, the tags around it)
        self.title = None

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        self.open.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if tag in self.open:
            while self.open.pop() != tag:
                pass

    def handle_data(self, data):
        if self.open and self.open[-1] == "title" and "svg" not in self.open:
            self.title = (self.title or "") + data
        self.texts.append((data, tuple(self.open)))


def document(path):
    parsed = Document()
    with open(path, encoding="utf-8") as handle:
        parsed.feed(handle.read())
    return parsed


def classes(attributes):
    return (attributes.get("class") or "").split()


def curves(path, stages, curve_count):
    parsed = document(path)
    panels = [a for tag, a in parsed.elements if tag == "g" and "stage" in classes(a)]
    lines = [a for tag, a in parsed.elements if tag == "polyline" and "curve" in classes(a)]
    if len(panels) != int(stages):
        fail(f"{len(panels)} stage panels, not {stages}")
    if len(lines) != int(curve_count):
        fail(f"{len(lines)} curves, not {curve_count}")
    on = [a.get("data-stage") for a in lines]
    if len(set(on)) != len(on):
        fail(f"two curves on one stage: {on}")
    if any(not a.get("points") for a in lines):
        fail("a curve without points")
    print(f"{len(panels)} panels, curves on stages {', '.join(on)}")


def visible(path, text):
    parsed = document(path)
    shown = [tags for data, tags in parsed.texts
             if text in data and "title" not in tags and "style" not in tags]
    if not shown:
        fail(f"\"{text}\" is not text of the page outside tooltips")
    if not any("svg" in tags and "text" in tags for tags in shown):
        fail(f"\"{text}\" is not a label of the chart")
    print(f"\"{text}\" shown {len(shown)} times, in the chart too")


def inert(path, title, text):
    parsed = document(path)
    if parsed.title != title:
        fail(f"the title became {parsed.title!r}: a script ran")
    scripts = [a for tag, a in parsed.elements if tag in ("script", "img", "iframe")]
    if scripts:
        fail(f"the DOM holds {scripts}")
    marked = [a for tag, a in parsed.elements if "data-pwned" in a]
    if marked:
        fail(f"an element got data-pwned: a script ran: {marked}")
    if not any(text in data for data, _ in parsed.texts):
        fail(f"{text!r} is not shown as text")
    print(f"title {title!r} kept, no script, the markup shown as text")


def main():
    checks = {"painted": painted, "curves": curves, "visible": visible, "inert": inert}
    if len(sys.argv) < 3 or sys.argv[1] not in checks:
        fail(__doc__)
    checks[sys.argv[1]](*sys.argv[2:])


if __name__ == "__main__":
    main()
