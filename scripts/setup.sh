#!/usr/bin/env bash
# Installs everything shardflow needs on a fresh Debian bookworm machine, idempotently:
# apt packages (servers, Java 17, JDBC driver, build deps for mysqlclient) and .venv.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
APT_PKGS=(mariadb-server mariadb-client postgresql openjdk-17-jre-headless libmariadb-java mydumper
          default-libmysqlclient-dev pkg-config build-essential python3-venv python3-dev
          docker-compose curl procps chromium percona-toolkit prometheus
          redis-server)  # prometheus: promtool tests DM's alert rules; redis-server: the Celery broker (make airflow-celery-up)

missing=()
for p in "${APT_PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  echo "[setup] apt: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  # Debian starts the packaged servers; the project runs its own on other ports.
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then "$PY" -m venv .venv; fi
stamp=.venv/.requirements.sha
want=$(sha256sum requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[setup] venv: installing requirements.txt (a few minutes the first time)"
  .venv/bin/pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/pip install -q -r requirements.txt 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/pip install -q --no-deps -e . 2>&1 | grep -v -E "^WARNING: Location|BuildBackendWarning|^\s*$|\*\*\*|!!|Please be careful|name as your package|with strategy" || true
  echo "$want" > "$stamp"
fi

# pyspark and py4j imported compiled from site-packages, not from Spark's zips (the module says why)
cp scripts/site/shardflow_pyspark_site.py scripts/site/shardflow_pyspark_site.pth \
  "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/"

# Verify: versions agree and Spark runs.
.venv/bin/python - <<'PY'
from importlib.metadata import version
import sys
# pip allows a comment after a requirement; the pin is what precedes it.
reqs = [l.split("#", 1)[0].strip() for l in open("requirements.txt")]
pins = {r.split("==")[0].lower(): r.split("==")[1].strip() for r in reqs if "==" in r}
bad = [f"{n}: want {v}, have {version(n)}" for n, v in pins.items() if version(n) != v]
if version("pyspark") != version("pyspark-client"):
    bad.append(f"pyspark {version('pyspark')} != pyspark-client {version('pyspark-client')}")
import pyspark
if pyspark.__version__ != version("pyspark"):
    bad.append(f"pyspark files are {pyspark.__version__}, package is {version('pyspark')}")
if bad:
    sys.exit("[setup] version check failed:\n  " + "\n  ".join(bad))
print("[setup] python packages agree: airflow", version("apache-airflow"), "pyspark", version("pyspark"))
PY
export SPARK_HOME=$(.venv/bin/python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
.venv/bin/spark-submit --version 2>&1 | grep -q "version $(.venv/bin/python -c 'import pyspark; print(pyspark.__version__)')" \
  || { echo "[setup] spark-submit --version failed"; exit 1; }
[ -f /usr/share/java/mariadb-java-client.jar ] || { echo "[setup] JDBC driver missing"; exit 1; }

# The driver JVM's class-data archive (dm_core/spark_options.py): rebuilt when the packages or
# the JVM change; a job without it only starts slower.
cds=.venv/spark-driver.jsa
cds_want=$( (echo "$want"; java -version 2>&1) | sha256sum | cut -d' ' -f1)
if [ ! -f "$cds" ] || [ "$(cat .venv/.spark-cds.sha 2>/dev/null)" != "$cds_want" ]; then
  echo "[setup] recording the Spark driver's class-data archive (about 20 s, once)"
  rm -f "$cds" "$cds.tmp"
  if .venv/bin/spark-submit --master 'local[2]' --jars /usr/share/java/mariadb-java-client.jar \
       --conf spark.ui.enabled=false \
       --conf "spark.driver.extraJavaOptions=$(.venv/bin/python -c 'from dm_core.spark_options import DRIVER_JAVA_OPTIONS as o; print(o)') -XX:ArchiveClassesAtExit=$PWD/$cds.tmp" \
       --conf "spark.pyspark.python=$PWD/.venv/bin/python" --conf "spark.pyspark.driver.python=$PWD/.venv/bin/python" \
       spark_jobs/class_archive.py > .venv/spark-cds.log 2>&1 && [ -s "$cds.tmp" ]; then
    mv "$cds.tmp" "$cds" && echo "$cds_want" > .venv/.spark-cds.sha
  else
    rm -f "$cds.tmp"
    echo "[setup] warning: no class-data archive (jobs start ~2 s slower); see .venv/spark-cds.log"
  fi
fi
# The binlog reader's hot modules compiled with Cython (dm_core/binlog/compiled.py): rebuilt only
# when a source changed; any failure leaves the reader pure Python and says so.
if ! .venv/bin/python -c 'import Cython' 2>/dev/null; then
  .venv/bin/pip install -q -r requirements-build.txt 2>&1 | grep -v "^WARNING: Location" || true
fi
PYTHONPATH=$PWD .venv/bin/python scripts/compile_binlog.py \
  || echo "[setup] compiled binlog reader: not built, the reader stays pure Python"
# The full load's line read compiled against mysqlclient's libmariadb (dm_core/full/compiled_lines.py)
PYTHONPATH=$PWD .venv/bin/python -m dm_core.full.compiled_lines build \
  || echo "[setup] compiled line read: not built, the full load reads lines in Python"
[ -x /usr/bin/chromium ] || { echo "[setup] chromium missing (the Migrations page's browser test needs it)"; exit 1; }
.venv/bin/dmctl --help >/dev/null 2>&1 || { echo "[setup] dmctl not installed in .venv"; exit 1; }
echo "[setup] ok: spark-submit works, JDBC driver present, dmctl installed"
