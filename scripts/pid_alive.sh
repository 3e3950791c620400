# Sourced by the stack's scripts. `pid_alive PID`: the process runs. `kill -0` alone is not
# enough: a killed server stays a zombie until its parent reaps it, and the init of these
# machines reaps orphans about 2 s late, so `up` right after a SIGKILL thought it still ran.
pid_alive() {
  local s
  s=$(ps -o stat= -p "$1" 2>/dev/null) && [ -n "$s" ] && [ "${s:0:1}" != Z ]
}
