#!/usr/bin/env python3
"""Stand-ins, built here from Debian's packages, for the public images the compose files name.

This machine reaches no image registry, so the compose tests point `docker.io/library/redis`
and `docker.io/library/nginx` at these (an override file): each holds the Debian package's
binary where the public image has it, the libraries it links, and the few files it reads, so
that the compose file's own command and mounts work unchanged.

Usage: stand_in_images.py PREFIX   (builds PREFIX/redis:latest and PREFIX/nginx:latest)
"""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from image_rootfs import Archive, interpreter, libraries, read  # noqa: E402

LIBDIR = "/lib/x86_64-linux-gnu"
PASSWD = b"root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"
GROUP = b"root:x:0:\nnogroup:x:65534:\n"
# As the public image's nginx.conf: its conf.d/ holds the sites.
NGINX_CONF = b"""user nobody nogroup;
worker_processes 1;
error_log stderr notice;
pid /tmp/nginx.pid;
events { worker_connections 256; }
http {
    access_log /dev/stdout;
    client_body_temp_path /tmp/body;
    proxy_temp_path /tmp/proxy;
    fastcgi_temp_path /tmp/fastcgi;
    uwsgi_temp_path /tmp/uwsgi;
    scgi_temp_path /tmp/scgi;
    include /etc/nginx/conf.d/*.conf;
}
"""


def with_libraries(tar, binary, at):
    tar.file(at, read(binary), 0o755)
    for name, path in sorted(libraries(binary, LIBDIR).items()):
        tar.file(f"{LIBDIR}/{name}", read(path), 0o755)
    loader = interpreter(binary)
    tar.file(loader, read(os.path.realpath(loader)), 0o755)
    tar.file("/etc/passwd", PASSWD)
    tar.file("/etc/group", GROUP)
    tar.file("/etc/nsswitch.conf", b"passwd: files\ngroup: files\nhosts: files dns\n")
    tar.dir("/tmp", 0o1777)


def build(name, containerfile, fill):
    with tempfile.TemporaryDirectory() as work:
        tar = Archive(os.path.join(work, "rootfs.tar"), 0)
        fill(tar)
        tar.close()
        with open(os.path.join(work, "Containerfile"), "w") as f:
            f.write("FROM scratch\nADD rootfs.tar /\n" + containerfile)
        subprocess.run(["podman", "build", "--quiet", "-t", name, work], check=True,
                       stdout=subprocess.DEVNULL)


def main():
    prefix = sys.argv[1]

    def redis(tar):
        with_libraries(tar, "/usr/bin/redis-server", "/usr/local/bin/redis-server")
        tar.dir("/data", 0o777)

    build(f"{prefix}/redis:latest", 'WORKDIR /data\nCMD ["redis-server"]\n', redis)

    def nginx(tar):
        with_libraries(tar, "/usr/sbin/nginx", "/usr/sbin/nginx")
        tar.file("/etc/nginx/nginx.conf", NGINX_CONF)
        tar.dir("/etc/nginx/conf.d")
        # Debian's build opens these before it reads its configuration.
        tar.dir("/var/log/nginx")
        tar.dir("/var/lib/nginx")

    build(f"{prefix}/nginx:latest", 'STOPSIGNAL SIGQUIT\nCMD ["nginx", "-g", "daemon off;"]\n', nginx)


if __name__ == "__main__":
    main()
