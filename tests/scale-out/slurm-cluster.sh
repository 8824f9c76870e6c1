# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# A throw-away single-node Slurm cluster in a directory (sourced, not run): munged with its own
# key and socket, slurmctld and slurmd in the foreground as background processes of this shell,
# a slurm.conf without cgroups (proctrack/linuxproc, task/none, no accounting), every state,
# spool, pid and log file under the directory, and ports nobody else listens on, so that it can
# run beside a real cluster or another copy of itself.  Client commands reach it through
# SLURM_CONF, which cluster_start exports.
#
#   . tests/scale-out/lib.sh; . tests/scale-out/slurm-cluster.sh
#   make_workdir; trap cluster_stop EXIT; cluster_start "$WORK/cluster"
#   sbatch --wrap hostname ...
#
# cluster_start skips (lib.sh's skip) when the machine cannot run Slurm: the packages are
# missing, this is not root (slurmd starts jobs as their users), or a daemon refuses to start;
# it says why, with the daemon's log.  Needs: munged munge slurmctld slurmd sbatch squeue
# scontrol sinfo (Debian: slurm-wlm, munge).

CLUSTER_PIDS=()

cluster_stop() {
  local i
  # slurmd first (it ends its job steps), then the controller, then munged.
  for ((i = ${#CLUSTER_PIDS[@]} - 1; i >= 0; i--)); do
    kill "${CLUSTER_PIDS[i]}" 2>/dev/null || true
    wait "${CLUSTER_PIDS[i]}" 2>/dev/null || true
  done
  CLUSTER_PIDS=()
}

# cluster_daemon_refused NAME LOG: a daemon did not come up: skip with its log.
cluster_daemon_refused() {
  show_file "$2" 40
  cluster_stop
  skip "$1 did not start (its log is above)"
}

cluster_start_munge() {
  local dir=$1/munge
  mkdir -p "$dir"
  chmod 755 "$dir"
  dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge.key"
  munged --foreground --socket="$dir/socket" --key-file="$dir/munge.key" \
    --log-file="$dir/munged.log" --pid-file="$dir/munged.pid" --seed-file="$dir/munged.seed" \
    >"$dir/munged.out" 2>&1 &
  CLUSTER_PIDS+=($!)
  if ! wait_until 15 "munged's socket" munge --socket="$dir/socket" --no-input; then
    cat "$dir/munged.out" >>"$dir/munged.log" 2>/dev/null
    cluster_daemon_refused munged "$dir/munged.log"
  fi
}

# cluster_write_conf DIR: slurm.conf for this node, as `slurmd -C` describes it.
cluster_write_conf() {
  local dir=$1 node hw
  node=$(hostname -s)
  hw=$(slurmd -C 2>/dev/null | sed -n 's/^NodeName=[^ ]* //p')
  [[ -n $hw ]] || skip "slurmd -C could not describe this machine"
  mkdir -p "$dir/state" "$dir/spool/$node" "$dir/log"
  cat >"$dir/slurm.conf" <<EOF
# Written by tests/scale-out/slurm-cluster.sh: a single-node test cluster.
ClusterName=fragsim-test
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
DependencyParameters=kill_invalid_depend
ReturnToService=2
MinJobAge=3600
NodeName=$node NodeAddr=127.0.0.1 $hw State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
}

cluster_node_idle() {
  [[ $(sinfo --noheader --node="$(hostname -s)" --format=%T 2>/dev/null) == idle ]]
}

# cluster_start DIR: start the cluster; returns once its node is idle.
cluster_start() {
  local dir=$1
  require_commands munged munge slurmctld slurmd sbatch squeue scontrol sinfo
  [[ $(id -u) -eq 0 ]] || skip "not root: slurmd must run as root to start jobs as their users"
  mkdir -p "$dir"
  chmod 755 "$dir"
  cluster_start_munge "$dir"
  cluster_write_conf "$dir"
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -D -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 &
  CLUSTER_PIDS+=($!)
  wait_until 30 "slurmctld to answer" scontrol ping ||
    cluster_daemon_refused slurmctld "$dir/log/slurmctld.out"
  slurmd -D -f "$SLURM_CONF" >"$dir/log/slurmd.out" 2>&1 &
  CLUSTER_PIDS+=($!)
  wait_until 30 "node $(hostname -s) to be idle" cluster_node_idle ||
    cluster_daemon_refused slurmd "$dir/log/slurmd.out"
}

# cluster_job_state JOBID: the state of a job (of every task of an array, one per line).
cluster_job_state() {
  scontrol --oneliner show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'
}

# cluster_job_done JOBID: true once every task of the job has ended, however.
cluster_job_done() {
  local states
  states=$(cluster_job_state "$1")
  [[ -n $states ]] && ! grep -qE '^(PENDING|CONFIGURING|RUNNING|COMPLETING|SUSPENDED|REQUEUED)' <<<"$states"
}

# cluster_wait JOBID SECONDS: wait for the job to end; fails unless every task COMPLETED.
cluster_wait() {
  local states
  wait_until "$2" "job $1 to end" cluster_job_done "$1" || {
    scontrol --oneliner show job "$1" >&2
    return 1
  }
  states=$(cluster_job_state "$1" | sort -u)
  if [[ $states != COMPLETED ]]; then
    echo "job $1 ended as: $(tr '\n' ' ' <<<"$states")" >&2
    scontrol --oneliner show job "$1" >&2
    return 1
  fi
}

# cluster_show_logs: the daemons' logs, for a failure message.
cluster_show_logs() {
  local dir
  dir=$(dirname "$SLURM_CONF")
  show_file "$dir/log/slurmctld.log"
  show_file "$dir/log/slurmd.log"
}
