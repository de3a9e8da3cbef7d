"""A loopback answerer in front of moto's server, for what moto does not model.

The real AWS CLI and eksctl send every request here (AWS_ENDPOINT_URL and eksctl's
AWS_*_ENDPOINT). Requests are passed to moto's server unchanged, except the few moto
cannot answer, which this answers itself in the EC2 Query API's XML
(https://docs.aws.amazon.com/AWSEC2/latest/APIReference/Query-Requests.html):

- DescribeAvailabilityZones naming a Local Zone (ZoneName.N, or a zone-name filter), and
  ModifyAvailabilityZoneGroup: moto lists only a region's Availability Zones, not its
  Local Zones or their opt-in groups. The Local Zone is the one P6e-GB200 UltraServer
  Capacity Blocks are sold in, us-east-1-dfw-2a
  (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html).

- EKS DescribeClusterVersions (GET /cluster-versions), which eksctl calls before anything
  else: moto has no such route. It lists Kubernetes 1.30 to 1.35 as supported, so eksctl
  accepts the plan's version; which versions EKS supports on a given day is EKS's
  (https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html), not
  checked here.

The client has already validated and signed each request by then: this sees only what
the real tool sent. Standard library only.

usage: python answerer.py LISTEN_PORT UPSTREAM_URL LOG_FILE
"""

import http.server
import json
import sys
import urllib.error
import urllib.parse
import urllib.request

EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"

# zone name -> (zone id, group name, parent zone, network border group)
LOCAL_ZONES = {
    "us-east-1-dfw-2a": ("use1-dfw2-az1", "us-east-1-dfw-2", "us-east-1b", "us-east-1-dfw-2"),
}

OPTED_IN = set()


def local_zones_asked(form):
    names = [v for k, v in form.items() if k.startswith("ZoneName.")]
    for key, value in form.items():
        # Filter.N.Name=zone-name with Filter.N.Value.M=...
        if key.startswith("Filter.") and key.endswith(".Name") and value == "zone-name":
            prefix = key[: -len("Name")]
            names += [v for k, v in form.items() if k.startswith(prefix + "Value.")]
    return [n for n in names if n in LOCAL_ZONES]


def zone_xml(name):
    zone_id, group, parent, border = LOCAL_ZONES[name]
    status = "opted-in" if group in OPTED_IN else "not-opted-in"
    return (
        "<item>"
        f"<zoneName>{name}</zoneName><zoneId>{zone_id}</zoneId>"
        "<zoneState>available</zoneState><regionName>us-east-1</regionName>"
        f"<groupName>{group}</groupName><networkBorderGroup>{border}</networkBorderGroup>"
        f"<optInStatus>{status}</optInStatus><zoneType>local-zone</zoneType>"
        f"<parentZoneName>{parent}</parentZoneName>"
        "<messageSet/></item>"
    )


def answer(form):
    """The XML body for a request this answers itself, or None to pass it to moto."""
    action = form.get("Action")
    if action == "DescribeAvailabilityZones":
        asked = local_zones_asked(form)
        if not asked:
            return None
        items = "".join(zone_xml(n) for n in asked)
        return (
            f'<DescribeAvailabilityZonesResponse xmlns="{EC2_NS}">'
            "<requestId>loopback-lz</requestId>"
            f"<availabilityZoneInfo>{items}</availabilityZoneInfo>"
            "</DescribeAvailabilityZonesResponse>"
        )
    if action == "ModifyAvailabilityZoneGroup":
        group = form.get("GroupName")
        if group not in {g for _, g, _, _ in LOCAL_ZONES.values()}:
            return None
        if form.get("OptInStatus") == "opted-in":
            OPTED_IN.add(group)
        return (
            f'<ModifyAvailabilityZoneGroupResponse xmlns="{EC2_NS}">'
            "<requestId>loopback-lz</requestId><return>true</return>"
            "</ModifyAvailabilityZoneGroupResponse>"
        )
    return None


CLUSTER_VERSIONS = ["1.30", "1.31", "1.32", "1.33", "1.34", "1.35"]


def answer_rest(method, path):
    """The JSON body for a REST request this answers itself, or None."""
    if method == "GET" and path.split("?")[0] == "/cluster-versions":
        return json.dumps({
            "clusterVersions": [
                {
                    "clusterVersion": v,
                    "clusterType": "eks",
                    "defaultVersion": v == CLUSTER_VERSIONS[-2],
                    "status": "STANDARD_SUPPORT",
                    "versionStatus": "STANDARD_SUPPORT",
                }
                for v in CLUSTER_VERSIONS
            ]
        })
    return None


class Handler(http.server.BaseHTTPRequestHandler):
    upstream = ""
    log_file = ""

    def log_message(self, *args):
        pass

    def _record(self, who, form, target):
        with open(self.log_file, "a", encoding="utf-8") as f:
            action = form.get("Action") or target or self.path
            f.write(f"{who} {action}\n")

    def _relay(self, method):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        form = {}
        if body and "x-www-form-urlencoded" in (self.headers.get("Content-Type") or ""):
            form = dict(urllib.parse.parse_qsl(body.decode("utf-8"), keep_blank_values=True))
        target = self.headers.get("X-Amz-Target", "")
        mine, kind = (answer(form), "text/xml") if form else (None, "")
        if mine is None and not form:
            mine, kind = answer_rest(method, self.path), "application/json"
        if mine is not None:
            self._record("answerer", form, target)
            data = mine.encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self._record("moto", form, target)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
        req = urllib.request.Request(self.upstream + self.path, data=body or None, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req) as r:
                status, rheaders, data = r.status, r.headers.items(), r.read()
        except urllib.error.HTTPError as e:
            status, rheaders, data = e.code, e.headers.items(), e.read()
        self.send_response(status)
        for k, v in rheaders:
            if k.lower() not in ("content-length", "transfer-encoding", "connection", "server", "date"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._relay("GET")

    def do_POST(self):
        self._relay("POST")

    def do_PUT(self):
        self._relay("PUT")

    def do_DELETE(self):
        self._relay("DELETE")


def main():
    port, upstream, log_file = int(sys.argv[1]), sys.argv[2].rstrip("/"), sys.argv[3]
    Handler.upstream = upstream
    Handler.log_file = log_file
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.serve_forever()


if __name__ == "__main__":
    main()
