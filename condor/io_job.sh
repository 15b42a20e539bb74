#!/bin/sh
# I/O load generator, after figure 5.1 of the 2013 co-scheduler thesis: writes a
# large file on shared storage, reads it back, and removes it, so that many of
# these jobs at once load the site's file server the way the thesis's did.
#
# Usage: io_job.sh SIZE_MB DIR [JOB]
#   SIZE_MB  megabytes to write and read back (the thesis wrote about 3 GB)
#   DIR      directory on the shared file system under test (NFS, Lustre, …)
#   JOB      the job's index, $(CoschedJob); names the file so jobs never collide
set -eu

if [ "$#" -lt 2 ]; then
    echo "usage: $0 SIZE_MB DIR [JOB]" >&2
    exit 2
fi
size_mb=$1
dir=$2
job=${3:-0}
case $size_mb in
    ''|*[!0-9]*) echo "$0: SIZE_MB must be a whole number, got '$size_mb'" >&2; exit 2 ;;
esac
case $job in
    ''|*[!0-9]*) echo "$0: JOB must be a whole number, got '$job'" >&2; exit 2 ;;
esac
if [ ! -d "$dir" ] || [ ! -w "$dir" ]; then
    echo "$0: $dir is not a writable directory" >&2
    exit 2
fi

file="$dir/cosched-io-$job.$$.dat"
trap 'rm -f "$file"' EXIT INT TERM

start=$(date +%s)
# Write in 1 MiB blocks and flush, as the thesis's program flushed per row.
dd if=/dev/zero of="$file" bs=1048576 count="$size_mb" conv=fsync 2>/dev/null
# Read it back; drop the page cache's help where we can (not required).
dd if="$file" of=/dev/null bs=1048576 2>/dev/null
end=$(date +%s)

echo "job $job: wrote and read $size_mb MiB in $dir in $((end - start)) s on $(hostname)"
