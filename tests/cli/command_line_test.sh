#!/usr/bin/env bash
# The three programs' command lines as people type them, by kubectl's and POSIX conventions:
# --help and -h on every program and verb exit 0 with the usage on standard output; --version names
# the version and the commit; --flag=value and --flag value alike; -f FILE, FILE and -f - (standard
# input) alike; a wrong flag exits 2 naming it and where help is.
#
# Usage: command_line_test.sh AUTOTUNE_BINARY OPERATOR_BINARY SOURCE_DIR
set -uo pipefail
autotune=$1
operator=$2
source_dir=$3
# shellcheck source=tests/support/checks.sh
source "$source_dir/tests/support/checks.sh"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
plugin=$(dirname "$autotune")/kubectl-autotune
example=$source_dir/examples/gpt2-large.yaml
version=$(sed -n 's/^project(autotune_operator VERSION \([0-9.]*\).*/\1/p' \
  "$source_dir/CMakeLists.txt")

# `$@` exits 0 and prints a usage that starts with `usage: $1`'s words and lists `--$2`.
helps() {
  local starts=$1 lists=$2
  shift 2
  "$@" >"$out/help.txt" 2>"$out/help.err" && test ! -s "$out/help.err" &&
    head -1 "$out/help.txt" | grep -q "^usage: $starts" &&
    { [[ -z $lists ]] || grep -q -- "--$lists" "$out/help.txt"; }
}
expect "autotune --help" helps "autotune plan" "" "$autotune" --help
expect "autotune -h" helps "autotune plan" "" "$autotune" -h
expect "autotune plan --help" helps "autotune plan" filename "$autotune" plan --help
expect "autotune plan FILE -h" helps "autotune plan" filename "$autotune" plan "$example" -h
expect "autotune run --help" helps "autotune run" results "$autotune" run --help
expect "autotune report --help" helps "autotune report" output-file "$autotune" report --help
expect "kubectl autotune --help" helps "kubectl autotune report" "" "$plugin" --help
expect "kubectl autotune report --help" helps "kubectl autotune report" kubeconfig \
  "$plugin" report --help
expect "kubectl autotune best -h" helps "kubectl autotune best" namespace "$plugin" best -h
expect "kubectl autotune plan --help" helps "kubectl autotune plan" filename "$plugin" plan --help
expect "autotune-operator --help" helps "autotune-operator" node-selector "$operator" --help

# `$@ --version` prints "$1 VERSION (commit COMMIT)": a commit of this repository (the one built,
# -dirty when the tree had changes), or unknown outside git.
names_version() {
  local name=$1 commit
  shift
  "$@" --version >"$out/version.txt" || return 1
  commit=$(sed -n "s/^$name $version (commit \\([0-9a-f]*\\)\\(-dirty\\)\\{0,1\\})\$/\\1/p" \
    "$out/version.txt")
  if [[ -z $commit ]]; then
    grep -qx "$name $version (commit unknown)" "$out/version.txt" &&
      ! git -C "$source_dir" rev-parse HEAD >/dev/null 2>&1
    return
  fi
  git -C "$source_dir" cat-file -e "$commit^{commit}" 2>/dev/null
}
expect "autotune --version names the version and the commit" names_version autotune "$autotune"
expect "kubectl autotune --version alike" names_version "kubectl autotune" "$plugin"
expect "autotune-operator --version alike" names_version autotune-operator "$operator"

"$autotune" plan "$example" >"$out/plan.txt"
# `autotune plan` spelled `$@` prints what `autotune plan FILE` prints.
same_plan() {
  "$@" >"$out/other.txt" && cmp -s "$out/plan.txt" "$out/other.txt"
}
expect "autotune plan -f FILE is autotune plan FILE" same_plan "$autotune" plan -f "$example"
expect "autotune plan --filename=FILE alike" same_plan "$autotune" plan "--filename=$example"
expect "autotune plan -f - reads standard input" \
  same_plan sh -c '"$1" plan -f - <"$2"' - "$autotune" "$example"
expect "autotune plan - reads standard input" \
  same_plan sh -c '"$1" plan - <"$2"' - "$autotune" "$example"

# `$@` exits 2, and its first line on standard error is $1.
refused() {
  local said=$1
  shift
  "$@" >/dev/null 2>"$out/refused.err"
  [[ $? -eq 2 ]] && [[ $(head -1 "$out/refused.err") == "$said" ]]
}
expect "an unknown flag is named" refused 'autotune plan: unknown flag --frobnicate' \
  "$autotune" plan --frobnicate "$example"
expect "two files are one too many" \
  refused 'autotune plan: one FILE only, given as -f FILE or FILE' \
  "$autotune" plan -f "$example" "$example"
expect "no file is missing" refused 'autotune plan: FILE is missing' "$autotune" plan
expect "a value that is missing is named" refused 'autotune run: --results: needs a value (DIR)' \
  "$autotune" run "$example" --results
expect "a switch takes true or false only" \
  refused 'autotune run: --resume: is a switch: true or false, not "yes"' \
  "$autotune" run "$example" --resume=yes
expect "the plugin names its verb's mistakes alike" \
  refused 'kubectl autotune best: one JOB only' "$plugin" best a b
expect "the plugin's flags come after the verb" \
  refused 'kubectl autotune: the verb comes first, then its flags' "$plugin" -n ml best job
expect "an unknown verb is named" refused 'autotune: unknown verb "frobnicate"' \
  "$autotune" frobnicate
expect "the operator names a wrong value" refused '--qps: "-1" is not a positive number' \
  "$operator" --qps=-1
expect "the operator names an unknown flag" refused 'unknown flag --no-such-flag' \
  "$operator" --no-such-flag=1
expect "the operator takes no arguments" refused 'unexpected argument "extra"' "$operator" extra

if ((failures > 0)); then
  echo "command_line_test: $failures checks failed"
  exit 1
fi
echo "command_line_test: all checks passed"
