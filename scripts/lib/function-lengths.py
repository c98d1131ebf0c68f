#!/usr/bin/env python3
"""Brace-matched lengths of Swift functions and initialisers (string literals and // comments skipped), longest first.
Prints those over 60 lines and the counts over 80 and 60, with and without the simulator (PaysimCore), as issue 44
measures them. Closures (a command's body) are not counted.
    python3 scripts/lib/function-lengths.py [Sources]"""
import os, re, sys
root = sys.argv[1] if len(sys.argv) > 1 else 'Sources'
decl = re.compile(r'^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|private|fileprivate|internal|static|final|override|mutating|nonisolated|package|class|convenience|required|@inline\(never\)|@discardableResult)\s+)*(func\s+[^\s(<]+|init[?!]?|deinit)\b')
out = []
for dp, dn, fn in os.walk(root):
    for f in fn:
        if not f.endswith('.swift'): continue
        p = os.path.join(dp, f)
        lines = open(p, encoding='utf-8').read().split('\n')
        i = 0
        while i < len(lines):
            m = decl.match(lines[i])
            if m:
                # find opening brace
                depth = 0; started = False; j = i
                while j < len(lines):
                    s = re.sub(r'"(?:\\.|[^"\\])*"', '""', lines[j])
                    s = s.split('//')[0]
                    for ch in s:
                        if ch == '{': depth += 1; started = True
                        elif ch == '}': depth -= 1
                    if started and depth <= 0: break
                    if not started and j > i + 8: break
                    j += 1
                if started:
                    out.append((j - i + 1, p, i + 1, m.group(1)))
            i += 1
out.sort(reverse=True)
over80 = [o for o in out if o[0] > 80]; over60 = [o for o in out if o[0] > 60]
for o in over60: print(f"{o[0]:4d} {o[1]}:{o[2]} {o[3]}")
print(f"over 80: {len(over80)} ({len([o for o in over80 if 'Paysim' not in o[1]])} outside the simulator); over 60: {len(over60)} ({len([o for o in over60 if 'Paysim' not in o[1]])} outside)")
