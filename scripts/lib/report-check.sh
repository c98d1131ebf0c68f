#!/usr/bin/env bash
# The HTML report in a real headless Chromium (Debian's), at 1400 px and at 800 px wide: a screenshot of each, and a
# check that fails when any word in the discrepancies table is broken across two lines ("capture|d"). The check runs
# in the page: each word of each cell is measured with a Range; a word whose boxes sit on two lines is broken. Then the
# first discrepancy's evidence (a details element) is opened: it must show, name a rule and an answer's SHA-256, and
# not widen the table (its long lines scroll inside it); the screenshot shows it open.
#   scripts/lib/report-check.sh REPORT.html [SCREENSHOT_DIR]
# Prints one line per width and `report-check: N passed`; exits 1 on the first failure.
set -euo pipefail
report=${1:?usage: report-check.sh REPORT.html [SCREENSHOT_DIR]}
shots=${2:-$(dirname "$report")}
[ -s "$report" ] || { echo "report-check: $report is missing or empty" >&2; exit 2; }
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ]; then
    echo "report-check: installing chromium" >&2
    as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null \
        || { echo "report-check: apt-get install chromium failed" >&2; exit 2; }
    CHROMIUM=$(command -v chromium)
fi
T=$(mktemp -d /tmp/payrecon-report.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$shots"
# The page as shipped, with the measuring script added at the end (its own inline script is allowed by the page's
# Content-Security-Policy, script-src 'unsafe-inline').
python3 - "$report" "$T/page.html" <<'PY'
import sys
page = open(sys.argv[1], encoding="utf-8").read()
probe = """<script>
window.addEventListener('load', function () {
  var broken = [], words = 0;
  document.querySelectorAll('#discrepancies td').forEach(function (cell) {
    var walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (var node = walker.nextNode(); node; node = walker.nextNode()) {
      var re = /\\S+/g, m;
      while ((m = re.exec(node.data)) !== null) {
        words++;
        var range = document.createRange();
        range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
        var tops = {};
        Array.prototype.forEach.call(range.getClientRects(), function (r) { if (r.width > 0) tops[Math.round(r.top)] = true; });
        if (Object.keys(tops).length > 1) broken.push(m[0]);
      }
    }
  });
  // Then a discrepancy's evidence is opened: its timeline must show, name a rule and an answer's SHA-256, and
  // not widen the table (its long lines scroll inside it).
  var evidence = 'none', ev = document.querySelector('details.evidence');
  if (ev) {
    var box = document.querySelector('#discrepancies').closest('.scroll') || document.body, before = box.scrollWidth;
    ev.open = true;
    var pre = ev.querySelector('pre'), r = pre.getBoundingClientRect(), t = pre.textContent;
    var problems = [];
    if (r.height <= 0) problems.push('not shown when opened');
    if (!/rule [0-9P]/.test(t)) problems.push('names no rule');
    if (!/sha256 [0-9a-f]{64}/.test(t)) problems.push('shows no answer hash');
    if (box.scrollWidth > before + 1) problems.push('widens the table (' + before + ' to ' + box.scrollWidth + ' px)');
    evidence = problems.length ? 'bad:' + problems.join(',').replace(/ /g, '_') : 'ok:' + ev.id;
  } else if (document.querySelector('#discrepancies tbody[data-provider]')) {
    evidence = 'missing';
  }
  document.title = 'report-check words=' + words + ' broken=' + broken.length + ' evidence=' + evidence + ' [' + broken.slice(0, 5).join(' | ') + ']';
});
</script>"""
open(sys.argv[2], "w", encoding="utf-8").write(page.replace("</body>", probe + "</body>", 1))
PY
passed=0
for width in 1400 800; do
    flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --window-size="$width,1800" --virtual-time-budget=3000
           --user-data-dir="$T/profile-$width")
    title=$("$CHROMIUM" "${flags[@]}" --dump-dom "file://$T/page.html" 2>/dev/null | sed -n 's:.*<title>\(report-check[^<]*\)</title>.*:\1:p')
    [ -n "$title" ] || { echo "FAIL $width px: the page did not run its check (no result from Chromium)"; exit 1; }
    "$CHROMIUM" "${flags[@]}" --screenshot="$shots/report-$width.png" "file://$T/page.html" >/dev/null 2>&1 || true
    words=$(sed -E 's/.*words=([0-9]+).*/\1/' <<<"$title"); broken=$(sed -E 's/.*broken=([0-9]+).*/\1/' <<<"$title")
    [ "$words" -gt 0 ] || { echo "FAIL $width px: the table has no words to check ($title)"; exit 1; }
    [ "$broken" = 0 ] || { echo "FAIL $width px: $broken word(s) broken across lines in the table: ${title#*broken=}"; exit 1; }
    evidence=$(sed -E 's/.*evidence=([^ ]+).*/\1/' <<<"$title")
    case "$evidence" in
        ok:*) shown="the evidence of ${evidence#ok:} opens with its rule and answer hashes, the table no wider" ;;
        none) shown="no discrepancy listed, no evidence to open" ;;
        missing) echo "FAIL $width px: discrepancies are listed but none carries its evidence (details.evidence)"; exit 1 ;;
        *) echo "FAIL $width px: a discrepancy's evidence, opened: ${evidence#bad:}"; exit 1 ;;
    esac
    echo "ok   $width px: $words words in the table, none broken across lines; $shown; screenshot $shots/report-$width.png"
    passed=$((passed + 1))
done
echo "report-check: $passed passed"
