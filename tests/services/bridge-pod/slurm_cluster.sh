#!/usr/bin/env bash
# A private single-node Slurm (munged, slurmctld, slurmd, slurmrestd with JWT) in a scratch
# directory, for the bridge pod's real-Slurm tests. No systemd: every daemon is started here
# and stopped by the pid recorded at start.
#
#   slurm_cluster.sh start BASE CTLD_PORT SLURMD_PORT REST_PORT   -> prints "ready" when usable
#   slurm_cluster.sh stop-rest BASE | start-rest BASE             (slurmrestd down for a while)
#   slurm_cluster.sh stop BASE                                    (cancel jobs, stop everything)
#
# BASE/jwt.key is the HS256 key; jobs run as the token's user; BASE/work is world-writable.
# MIN_JOB_AGE (env, default 3600): seconds a finished job stays queryable before Slurm purges it.
set -euo pipefail

cmd=$1
BASE=$2
export SLURM_CONF=$BASE/slurm.conf

start_rest() {
  local port
  port=$(cat "$BASE/rest.port")
  SLURM_JWT=daemon setsid slurmrestd -f "$SLURM_CONF" -a rest_auth/jwt \
    -s openapi/v0.0.36,openapi/v0.0.37,openapi/v0.0.38 -u nobody -g nogroup "127.0.0.1:$port" \
    >>"$BASE/log/slurmrestd.log" 2>&1 </dev/null &
  echo $! >"$BASE/pids/slurmrestd"
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "slurmrestd did not listen on $port" >&2
  cat "$BASE/log/slurmrestd.log" >&2
  return 1
}

stop_pid() {  # name
  local f=$BASE/pids/$1
  [ -f "$f" ] || return 0
  local pid
  pid=$(cat "$f")
  if kill -TERM "$pid" 2>/dev/null; then
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      # a zombie (PID 1 may not reap) counts as stopped
      [ "$(ps -o stat= -p "$pid" 2>/dev/null | cut -c1)" = "Z" ] && break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

case "$cmd" in
start)
  CTLD_PORT=$3 SLURMD_PORT=$4 REST_PORT=$5
  NODE=$(hostname -s)
  mkdir -p "$BASE"/{munge/etc,state,spool,log,work,pids}
  chmod 755 "$BASE" "$BASE/munge"; chmod 700 "$BASE/munge/etc"; chmod 1777 "$BASE/work"
  echo "$REST_PORT" >"$BASE/rest.port"
  mungekey --create --keyfile="$BASE/munge/etc/munge.key" >/dev/null 2>&1
  munged --key-file="$BASE/munge/etc/munge.key" --socket="$BASE/munge/munge.socket.2" \
    --pid-file="$BASE/munge/munged.pid" --log-file="$BASE/munge/munged.log" \
    --seed-file="$BASE/munge/etc/munged.seed"
  cp "$BASE/munge/munged.pid" "$BASE/pids/munged"
  dd if=/dev/urandom of="$BASE/jwt.key" bs=32 count=1 status=none; chmod 600 "$BASE/jwt.key"
  cat >"$SLURM_CONF" <<CONF
ClusterName=bridgetest
SlurmctldHost=$NODE
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$BASE/munge/munge.socket.2
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$BASE/jwt.key
StateSaveLocation=$BASE/state
SlurmdSpoolDir=$BASE/spool
SlurmctldPidFile=$BASE/slurmctld.pid
SlurmdPidFile=$BASE/slurmd.pid
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmdLogFile=$BASE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
MinJobAge=${MIN_JOB_AGE:-3600}
SchedulerParameters=sched_interval=1
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=2 RealMemory=1024 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
  slurmctld -f "$SLURM_CONF" -c
  for _ in $(seq 1 100); do [ -s "$BASE/slurmctld.pid" ] && break; sleep 0.05; done
  cp "$BASE/slurmctld.pid" "$BASE/pids/slurmctld"
  slurmd -f "$SLURM_CONF"
  for _ in $(seq 1 100); do [ -s "$BASE/slurmd.pid" ] && break; sleep 0.05; done
  cp "$BASE/slurmd.pid" "$BASE/pids/slurmd"
  for _ in $(seq 1 200); do
    if scontrol ping >/dev/null 2>&1 && [ "$(sinfo -h -o %T 2>/dev/null)" = "idle" ]; then break; fi
    sleep 0.1
  done
  if [ "$(sinfo -h -o %T 2>/dev/null)" != "idle" ]; then
    echo "slurm node not idle: $(sinfo -h -o %T 2>&1)" >&2
    tail -20 "$BASE/log/slurmctld.log" "$BASE/log/slurmd.log" >&2 || true
    exit 1
  fi
  start_rest
  echo ready
  ;;
stop-rest) stop_pid slurmrestd ;;
start-rest) start_rest; echo ready ;;
stop)
  if [ -f "$SLURM_CONF" ]; then
    scancel -p debug >/dev/null 2>&1 || true
    for _ in $(seq 1 30); do
      [ -z "$(squeue -h 2>/dev/null | grep -v CG)" ] && break
      sleep 0.1
    done
  fi
  stop_pid slurmrestd
  stop_pid slurmd
  stop_pid slurmctld
  stop_pid munged
  ;;
*) echo "usage: $0 start|stop|stop-rest|start-rest BASE ..." >&2; exit 2 ;;
esac
