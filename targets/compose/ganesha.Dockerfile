# nfs-ganesha exporting /export read-only over NFSv4 (docker-compose.yml's `nfs` service).
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends nfs-ganesha nfs-ganesha-vfs \
    && rm -rf /var/lib/apt/lists/* && mkdir -p /export /var/lib/nfs/ganesha
COPY targets/compose/ganesha.conf /etc/ganesha/ganesha.conf
EXPOSE 2049
CMD ["ganesha.nfsd", "-F", "-f", "/etc/ganesha/ganesha.conf", "-L", "/dev/stdout", "-p", "/run/ganesha.pid"]
