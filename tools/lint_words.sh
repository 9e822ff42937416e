#!/usr/bin/env bash
# lint_words.sh — fail when source or documentation speaks of how it was written instead of what it
# is: a numbered round of work ("wave" and a number, or "this"/"since"/"until" ... "wave"), a
# reference to one of this project's issues by number, a TODO or FIXME marker. A GitHub reference of
# another project ("owner/repo issue #N", as the hardware catalog's sources cite) is a source, not a
# working word, and passes.
#
# Usage: tools/lint_words.sh [FILE...]   (no FILE: every tracked source and documentation file)
# Prints FILE:LINE: the word and the line for each hit; exit 1 if there is one, 0 otherwise.
set -u
cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(git ls-files '*.c' '*.h' '*.cu' '*.py' '*.sh' '*.md' '*.json' '*.sql' 'Makefile' |
                       grep -v -x 'tools/lint_words.sh')
fi
[ ${#files[@]} -gt 0 ] || { echo "lint-words: no files"; exit 0; }
perl -e '
  my ($n, $hits) = (0, 0);
  my $round = qr/\b(?:waves?[ -]?\d+|(?:this|that|next|last|since|until|before|after|earlier|previous)\s+waves?\b)/i;
  my $issue = qr/\bissues?\s*#?\s*\d+/i;
  my $mark  = qr/\b(?:TODO|FIXME)\b/;
  for my $f (@ARGV) {
    open(my $fh, "<", $f) or do { print "$f: cannot read: $!\n"; $hits++; next };
    $n++;
    while (my $line = <$fh>) {
      my $t = $line;
      $t =~ s{[\w.-]+/[\w.-]+\s+issues?\s*#\d+}{}g; # another project'"'"'s issue: a source
      for my $re ($round, $issue, $mark) {
        if ($t =~ /($re)/) {
          chomp(my $l = $line);
          $l = substr($l, 0, 160) . "..." if length($l) > 160;
          print "$f:$.: working word \"$1\" (describe the code as it is): $l\n";
          $hits++;
          last;
        }
      }
    }
    close($fh);
  }
  print $hits ? "lint-words: working words found\n" : "lint-words: $n files, no working words\n";
  exit($hits ? 1 : 0);
' "${files[@]}"
