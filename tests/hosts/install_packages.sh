#!/bin/sh
# Install what the namespace hosts need (Debian's ip, sshd, Slurm and munge), without starting any service:
# a policy-rc.d that refuses every start is put in place for the install when the machine has none.
set -eu
policy=/usr/sbin/policy-rc.d
made=""
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && made=1
fi
trap '[ -z "$made" ] || rm -f "$policy"' EXIT
apt-get update -q > /dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends iproute2 openssh-server slurm-wlm munge > /dev/null
