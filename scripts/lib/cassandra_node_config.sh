# shellcheck shell=bash
# The configuration of one local Cassandra node, sourced by scripts/cassandra:
# the JVM's options, the node's tokens, the heap-derived overload limits,
# the serving settings, and the files written into its conf/ folder
# (cassandra.yaml, logback.xml). Reads the globals scripts/cassandra sets
# for the profile and the start (PROFILE, NODES, CLUSTER_NAME, HEAP, TUNING,
# DISK_ACCESS_MODE, ADVERTISE, CERTS) and its node_* helpers;
# docs/cassandra.md says why each setting is what it is.

JVM17_OPTIONS=(
  # From Cassandra's conf/jvm17-server.options (cassandra-5.0).
  -XX:+UseG1GC -XX:+ParallelRefProcEnabled -XX:MaxTenuringThreshold=1
  -XX:G1HeapRegionSize=16m -XX:G1RSetUpdatingPauseTimePercent=5
  -XX:MaxGCPauseMillis=300 -XX:InitiatingHeapOccupancyPercent=70
  -Djdk.attach.allowAttachSelf=true
  --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
  --add-exports java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED
  --add-exports java.rmi/sun.rmi.registry=ALL-UNNAMED
  --add-exports java.rmi/sun.rmi.server=ALL-UNNAMED
  --add-exports java.sql/java.sql=ALL-UNNAMED
  --add-exports java.base/java.lang.ref=ALL-UNNAMED
  --add-exports jdk.unsupported/sun.misc=ALL-UNNAMED
  --add-exports jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED
  --add-exports jdk.attach/sun.tools.attach=ALL-UNNAMED
  --add-opens java.base/java.lang.module=ALL-UNNAMED
  --add-opens java.base/jdk.internal.loader=ALL-UNNAMED
  --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
  --add-opens java.base/jdk.internal.reflect=ALL-UNNAMED
  --add-opens java.base/jdk.internal.math=ALL-UNNAMED
  --add-opens java.base/jdk.internal.module=ALL-UNNAMED
  --add-opens java.base/jdk.internal.util.jar=ALL-UNNAMED
  --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED
  --add-opens java.base/sun.nio.ch=ALL-UNNAMED
  --add-opens java.base/java.io=ALL-UNNAMED
  --add-opens java.base/java.lang.reflect=ALL-UNNAMED
  --add-opens jdk.compiler/com.sun.tools.javac=ALL-UNNAMED
  --add-opens java.base/java.lang=ALL-UNNAMED
  --add-opens java.base/java.util=ALL-UNNAMED
  -Dio.netty.tryReflectionSetAccessible=true
  -Dio.netty.allocator.useCacheForAllThreads=true
  -Dio.netty.allocator.maxOrder=11
  # From conf/jvm-server.options.
  -Xss256k -XX:+UseTLAB -XX:+ResizeTLAB -XX:+PerfDisableSharedMem
  -XX:StringTableSize=1000003 -Djava.net.preferIPv4Stack=true
  -XX:+ExitOnOutOfMemoryError
  # Fast start of a fresh local cluster (see docs/cassandra.md).
  -Dcassandra.skip_wait_for_gossip_to_settle=0
  -Dcassandra.superuser_setup_delay_ms=0
)

# node_tokens I N: the 16 tokens of node I in a cluster of N nodes, comma-separated.
node_tokens() {
  "$(python_bin)" -c 'import sys
i, n, v = int(sys.argv[1]), int(sys.argv[2]), 16
print(",".join(str(-2**63 + (k * n + i - 1) * 2**64 // (v * n)) for k in range(v)))' "$1" "$2"
}

# heap_mib: the --heap of this start in MiB.
heap_mib() {
  local n=${HEAP%[MmGg]}
  case $HEAP in *[Gg]) echo $((n * 1024)) ;; *) echo "$n" ;; esac
}

# Overload limits, all derived from the heap H (docs/cassandra.md "Overload").
# A node's direct memory holds the chunk (file) cache, the networking buffer
# pool and every encoded answer not yet written to the socket; by default it
# may grow to the heap size, and an answer that does not fit ends the JVM
# (8,192 reads of 100 KB in flight did that to a 1 GiB node). Cassandra bounds
# only *request* bytes in flight (bodies of requests read whose answers are not
# yet flushed): past the bound it stops reading the connection (backpressure;
# Overloaded instead for clients that asked for THROW_ON_OVERLOAD). That bounds
# the writes of an ingest and the work in progress, but an answer counts as
# done once flushed into the connection's outbound queue, so answers waiting
# for a slow reader are bounded only by the client's requests in flight. The
# node therefore gets direct memory for the caches plus an answer budget that
# holds the project's largest load (8,192 x 100 KB) twice over:
#   file_cache_size                                     H/8   (1 GiB heap: 128 MiB)
#   networking_cache_size                               H/16  (64 MiB)
#   native_transport_max_request_data_in_flight_per_ip  H/64  (16 MiB; default H/40)
#   native_transport_max_request_data_in_flight         H/16  (64 MiB; default H/10)
#   native_transport_max_frame_size                     16 MiB (5.0's default, stated)
#   -XX:MaxDirectMemorySize                             H/8 + H/16 + 2 GiB
#                                                       (the caches + the answer budget)
ANSWER_BUDGET_MIB=2048
overload_yaml() {
  ((OVERLOAD_LIMITS)) || { echo "# --no-overload-limits: Cassandra's defaults"; return; }
  local h
  h=$(heap_mib)
  cat <<EOF
# Overload limits (scripts/cassandra, docs/cassandra.md "Overload"), heap $h MiB.
file_cache_size: $((h / 8))MiB
networking_cache_size: $((h / 16))MiB
native_transport_max_request_data_in_flight_per_ip: $((h / 64))MiB
native_transport_max_request_data_in_flight: $((h / 16))MiB
native_transport_max_frame_size: 16MiB
native_transport_throw_on_overload: false
EOF
}

# overload_jvm_opts: the JVM side of the limits above.
overload_jvm_opts() {
  ((OVERLOAD_LIMITS)) || return 0
  local h
  h=$(heap_mib)
  echo "-XX:MaxDirectMemorySize=$((h / 8 + h / 16 + ANSWER_BUDGET_MIB))m"
}

# Serving large blobs (docs/cassandra.md "Serving large blobs"): what a node
# that mostly answers reads of 0.5 kB - 1 MiB cells by key, from many
# connections of one client address, and takes bulk ingests, needs beyond
# Cassandra 5.0's defaults. Values that equal 5.0's default are stated anyway
# so that a reader of the yaml sees the whole serving configuration.
serving_yaml() {
  [[ $TUNING == serving ]] || { echo "# --tuning stock: no serving settings"; return; }
  cat <<EOF
# Serving large blobs (scripts/cassandra --tuning serving, docs/cassandra.md).
disk_access_mode: $DISK_ACCESS_MODE
file_cache_enabled: false
concurrent_reads: 32
concurrent_writes: 32
native_transport_max_threads: 128
native_transport_max_concurrent_connections: 8192
native_transport_max_concurrent_connections_per_ip: 4096
compaction_throughput: 64MiB/s
commitlog_segment_size: 32MiB
EOF
}

write_node_config() {
  local i=$1 dir ip seeds rpc_line="" tls_block="" auth_block
  dir=$(node_dir "$i")
  ip=$(node_ip "$i")
  seeds="$(node_ip 1):7000"
  mkdir -p "$dir"/{data,commitlog,saved_caches,hints,cdc_raw,logs}
  if [[ -n $ADVERTISE ]]; then
    local adv
    IFS=, read -r -a adv <<<"$ADVERTISE"
    rpc_line="broadcast_rpc_address: ${adv[$((i - 1))]}"
  fi
  if ((SECURE)); then
    auth_block="authenticator: PasswordAuthenticator
authorizer: CassandraAuthorizer
role_manager: CassandraRoleManager
network_authorizer: AllowAllNetworkAuthorizer"
    tls_block="client_encryption_options:
  enabled: true
  optional: false
  keystore: $CERTS/server.p12
  keystore_password: cqlstream
  truststore: $CERTS/truststore.p12
  truststore_password: cqlstream
  store_type: PKCS12
  require_client_auth: $( ((CLIENT_AUTH)) && echo true || echo false)"
  else
    auth_block="authenticator: AllowAllAuthenticator
authorizer: AllowAllAuthorizer
role_manager: CassandraRoleManager
network_authorizer: AllowAllNetworkAuthorizer"
    tls_block="client_encryption_options:
  enabled: false"
  fi

  cat >"$dir/cassandra.yaml" <<EOF
# Generated by scripts/cassandra up (profile $PROFILE, node $i); rewritten on every start.
cluster_name: '$CLUSTER_NAME'
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
num_tokens: 16
# Evenly spread, deterministic tokens: node i of N owns every N-th slice.
initial_token: $(node_tokens "$i" "$NODES")
# A fresh cluster has nothing to stream; nodes are never added to one with data.
auto_bootstrap: false
endpoint_snitch: GossipingPropertyFileSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "$seeds"
listen_address: $ip
rpc_address: $ip
$rpc_line
storage_port: 7000
native_transport_port: 9042
start_native_transport: true
data_file_directories:
  - $dir/data
commitlog_directory: $dir/commitlog
saved_caches_directory: $dir/saved_caches
hints_directory: $dir/hints
cdc_raw_directory: $dir/cdc_raw
commitlog_sync: periodic
commitlog_sync_period: 10000ms
$auth_block
$tls_block
# The architecture-specific provider jar (ACCP) is not among the Maven jars.
crypto_provider:
  - class_name: org.apache.cassandra.security.DefaultCryptoProvider
    parameters:
      - fail_on_missing_provider: "false"
# Tests create and drop many tables: no snapshots on DROP/TRUNCATE.
auto_snapshot: false
# Every node is 5.0: use 5.0's storage formats.
storage_compatibility_mode: NONE
concurrent_compactors: 1
$(overload_yaml)
$(serving_yaml)
EOF

  cat >"$dir/cassandra-rackdc.properties" <<EOF
dc=dc1
rack=rack1
EOF

  cat >"$dir/logback.xml" <<EOF
<!-- Generated by scripts/cassandra up. -->
<configuration scan="false">
  <appender name="SYSTEMLOG" class="ch.qos.logback.core.rolling.RollingFileAppender">
    <file>$dir/logs/system.log</file>
    <rollingPolicy class="ch.qos.logback.core.rolling.FixedWindowRollingPolicy">
      <fileNamePattern>$dir/logs/system.log.%i.gz</fileNamePattern>
      <minIndex>1</minIndex>
      <maxIndex>3</maxIndex>
    </rollingPolicy>
    <triggeringPolicy class="ch.qos.logback.core.rolling.SizeBasedTriggeringPolicy">
      <maxFileSize>20MB</maxFileSize>
    </triggeringPolicy>
    <encoder>
      <pattern>%-5level [%thread] %date{ISO8601} %logger{0} - %msg%n</pattern>
    </encoder>
  </appender>
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <filter class="ch.qos.logback.classic.filter.ThresholdFilter">
      <level>WARN</level>
    </filter>
    <encoder>
      <pattern>%-5level [%thread] %date{ISO8601} %logger{0} - %msg%n</pattern>
    </encoder>
  </appender>
  <root level="INFO">
    <appender-ref ref="SYSTEMLOG"/>
    <appender-ref ref="STDOUT"/>
  </root>
</configuration>
EOF
}
