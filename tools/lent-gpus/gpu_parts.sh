#!/bin/bash
# Re-split the wheel parts of ../shared/tools/gpu-wheels (.gpu/part0 .. partN, each holding
# part.tar.K, the last one install.sh) into smaller parts, so that the checkout plus one part
# stays under the device tool's 64 MiB per transfer as the committed tree grows:
#   bash tools/lent-gpus/gpu_parts.sh [.gpu] [MiB]   # MiB default: 64 - tracked tree - 4 of margin
# install.sh concatenates /tmp/stash/part.tar.* in numeric order, so it works unchanged.
set -eo pipefail
dir=${1:-.gpu}
tree_mib=$(( ($(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1) >> 20) + 1 ))
mib=${2:-$(( 64 - tree_mib - 4 ))}
[ "$mib" -ge 8 ] || { echo "gpu_parts: the tracked tree (${tree_mib} MiB) leaves no room"; exit 1; }
install=$(ls "$dir"/part*/install.sh | head -1)
[ -n "$install" ] || { echo "gpu_parts: no install.sh under $dir"; exit 1; }
tmp=$(mktemp -d)
cp "$install" "$tmp/install.sh"
# every part.tar.K in numeric order of K, then the same bytes cut anew
find "$dir" -name 'part.tar.*' | awk -F. '{print $NF "\t" $0}' | sort -n | cut -f2- \
    | xargs cat | split -b "${mib}M" -d -a 3 - "$tmp/chunk."
rm -rf "$dir"
mkdir -p "$dir"
i=0
for chunk in "$tmp"/chunk.*; do
    mkdir -p "$dir/part$i"
    mv "$chunk" "$dir/part$i/part.tar.$i"
    i=$((i + 1))
done
mv "$tmp/install.sh" "$dir/part$((i - 1))/"
rmdir "$tmp"
echo "gpu_parts: $i parts of at most $mib MiB in $dir (tracked tree: $tree_mib MiB)"
du -sh "$dir"/part* | tr '\n' ' '
echo
