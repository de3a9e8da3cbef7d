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

- Capacity Blocks: DescribeCapacityBlockOfferings (from the offerings file named by
  LOOPBACK_OFFERINGS, shaped like `describe-capacity-block-offerings --output json`, less the
  ids listed in the file LOOPBACK_SOLD_OUT, read on every request), PurchaseCapacityBlock
  (a reservation in state `scheduled`, with the request's tags) and
  DescribeCapacityReservations of what was bought here (filters instance-type,
  availability-zone, state). moto models On-Demand Capacity Reservations, not blocks.
- EC2 topology (moto has neither call): DescribeCapacityReservationTopology
  (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeCapacityReservationTopology.html)
  answers the reservations in the file LOOPBACK_RESERVATION_TOPOLOGY (shaped like
  `describe-capacity-reservation-topology --output json`, read on every request) and the
  blocks bought here, whose network nodes are empty as EC2's are for a reservation that is
  not pending or active; DescribeInstanceTopology
  (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTopology.html)
  answers the instances in LOOPBACK_INSTANCE_TOPOLOGY (shaped like
  `describe-instance-topology --output json`), paged by MaxResults (default 20) when no
  ids are named. Both refuse what the API reference refuses: MaxResults with ids, more
  than 100 ids, a filter name the call does not list.
- Service Quotas ListServiceQuotas for `fsx` (moto serves only default VPC quotas): one
  quota, LOOPBACK_FSX_QUOTA_GIB GiB (default 100800), under the name this answerer gives it,
  "Lustre Persistent SSD storage capacity (GiB)". That name is an assumption, the same
  one `aws-cli.sh` matches by; the real one is for a human to check (docs/advisor.md).
- SSM GetParameter of an EKS-optimized AMI's public parameter
  (/aws/service/eks/optimized-ami/..., https://docs.aws.amazon.com/eks/latest/userguide/retrieve-ami-id.html):
  moto holds only the Amazon Linux parameters. The id it answers, ami-0f0e0d0c0b0a09080, is
  made up.
- EKS DescribeClusterVersions (GET /cluster-versions), which eksctl calls before anything
  else: moto has no such route. It lists Kubernetes 1.30 to 1.35 as supported, so eksctl
  accepts the plan's version; which versions EKS supports on a given day is EKS's
  (https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html), not
  checked here.

The client has already validated and signed each request by then: this sees only what
the real tool sent. Standard library only.

usage: python answerer.py LISTEN_PORT UPSTREAM_URL LOG_FILE
"""

import fnmatch
import http.server
import itertools
import json
import os
import sys
import threading
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


BLOCKS = []  # reservations bought here: dicts
LOCK = threading.Lock()
IDS = itertools.count(1)


def offerings():
    path = os.environ.get("LOOPBACK_OFFERINGS")
    if not path:
        return []
    with open(path, encoding="utf-8") as f:
        listed = json.load(f)["CapacityBlockOfferings"]
    sold = set()
    sold_path = os.environ.get("LOOPBACK_SOLD_OUT")
    if sold_path and os.path.exists(sold_path):
        with open(sold_path, encoding="utf-8") as f:
            sold = set(f.read().split())
    return [o for o in listed if o["CapacityBlockOfferingId"] not in sold]


def offering_matches(o, form):
    if "UltraserverType" in form:
        if o.get("UltraserverType") != form["UltraserverType"]:
            return False
        if str(o.get("UltraserverCount")) != form.get("UltraserverCount", "1"):
            return False
    else:
        if o["InstanceType"] != form.get("InstanceType"):
            return False
        if str(o["InstanceCount"]) != form.get("InstanceCount"):
            return False
    return str(o["CapacityBlockDurationHours"]) == form.get("CapacityDurationHours")


def offering_xml(o):
    fields = [
        ("capacityBlockOfferingId", o["CapacityBlockOfferingId"]),
        ("instanceType", o["InstanceType"]),
        ("availabilityZone", o["AvailabilityZone"]),
        ("instanceCount", o["InstanceCount"]),
        ("startDate", o["StartDate"]),
        ("endDate", o["EndDate"]),
        ("capacityBlockDurationHours", o["CapacityBlockDurationHours"]),
        ("upfrontFee", o["UpfrontFee"]),
        ("currencyCode", o["CurrencyCode"]),
        ("tenancy", o["Tenancy"]),
    ]
    for key, tag in (("UltraserverType", "ultraserverType"), ("UltraserverCount", "ultraserverCount")):
        if key in o:
            fields.append((tag, o[key]))
    return "<item>" + "".join(f"<{k}>{v}</{k}>" for k, v in fields) + "</item>"


def tags_of(form):
    tags = []
    for n in itertools.count(1):
        key = form.get(f"TagSpecification.1.Tag.{n}.Key")
        if key is None:
            return tags
        tags.append((key, form.get(f"TagSpecification.1.Tag.{n}.Value", "")))


def filters_of(form):
    out = {}
    for n in itertools.count(1):
        name = form.get(f"Filter.{n}.Name")
        if name is None:
            return out
        out[name] = [v for k, v in form.items() if k.startswith(f"Filter.{n}.Value.")]


def reservation_xml(b):
    tags = "".join(f"<item><key>{k}</key><value>{v}</value></item>" for k, v in b["tags"])
    return (
        "<item>"
        f"<capacityReservationId>{b['id']}</capacityReservationId>"
        f"<instanceType>{b['type']}</instanceType><availabilityZone>{b['zone']}</availabilityZone>"
        f"<totalInstanceCount>{b['count']}</totalInstanceCount><state>{b['state']}</state>"
        f"<startDate>{b['start']}</startDate><endDate>{b['end']}</endDate>"
        f"<reservationType>capacity-block</reservationType><tagSet>{tags}</tagSet>"
        "</item>"
    )


def answer_capacity_blocks(action, form):
    if action == "DescribeCapacityBlockOfferings":
        items = "".join(offering_xml(o) for o in offerings() if offering_matches(o, form))
        return (
            f'<DescribeCapacityBlockOfferingsResponse xmlns="{EC2_NS}">'
            f"<requestId>loopback-cb</requestId><capacityBlockOfferingSet>{items}</capacityBlockOfferingSet>"
            "</DescribeCapacityBlockOfferingsResponse>"
        )
    if action == "PurchaseCapacityBlock":
        wanted = form.get("CapacityBlockOfferingId")
        o = next((o for o in offerings() if o["CapacityBlockOfferingId"] == wanted), None)
        if o is None:
            return None  # moto then answers with its own error
        with LOCK:
            b = {
                "id": f"cr-{next(IDS):017x}",
                "type": o["InstanceType"],
                "zone": o["AvailabilityZone"],
                "count": o["InstanceCount"],
                "state": "scheduled",
                "start": o["StartDate"],
                "end": o["EndDate"],
                "tags": tags_of(form),
            }
            BLOCKS.append(b)
        return (
            f'<PurchaseCapacityBlockResponse xmlns="{EC2_NS}"><requestId>loopback-cb</requestId>'
            f"<capacityReservation>{reservation_xml(b)[6:-7]}</capacityReservation>"
            "</PurchaseCapacityBlockResponse>"
        )
    if action == "DescribeCapacityReservations":
        filters = filters_of(form)
        keys = {"instance-type": "type", "availability-zone": "zone", "state": "state"}
        with LOCK:
            chosen = [
                b for b in BLOCKS
                if all(b[keys[name]] in values for name, values in filters.items() if name in keys)
            ]
        items = "".join(reservation_xml(b) for b in chosen)
        return (
            f'<DescribeCapacityReservationsResponse xmlns="{EC2_NS}"><requestId>loopback-cb</requestId>'
            f"<capacityReservationSet>{items}</capacityReservationSet>"
            "</DescribeCapacityReservationsResponse>"
        )
    return None


def ec2_error(code, message):
    """An EC2 Query API error (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html)."""
    return (400, (
        "<Response><Errors><Error>"
        f"<Code>{code}</Code><Message>{message}</Message>"
        "</Error></Errors><RequestID>loopback-topology</RequestID></Response>"
    ))


def listed(form, name):
    """The values of a list parameter sent as NAME.1, NAME.2, ..."""
    out = []
    for n in itertools.count(1):
        value = form.get(f"{name}.{n}")
        if value is None:
            return out
        out.append(value)


def read_json(env, key):
    path = os.environ.get(env)
    if not path or not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return json.load(f)[key]


def topology_filters_ok(form, allowed):
    for name in filters_of(form):
        if name not in allowed:
            return ec2_error("InvalidParameterValue", f"The filter '{name}' is invalid")
    return None


def filter_match(item, filters, fields):
    for name, values in filters.items():
        have = item.get(fields[name])
        if not any(fnmatch.fnmatchcase(have or "", v) for v in values):
            return False
    return True


def nodes_xml(nodes):
    return "<networkNodeSet>" + "".join(f"<item>{n}</item>" for n in nodes or []) + "</networkNodeSet>"


def topology_item(fields, item):
    parts = [f"<{tag}>{item[key]}</{tag}>" for key, tag in fields if item.get(key) is not None]
    return "<item>" + "".join(parts) + nodes_xml(item.get("NetworkNodes")) + "</item>"


RESERVATION_FIELDS = [
    ("CapacityReservationId", "capacityReservationId"), ("CapacityBlockId", "capacityBlockId"),
    ("State", "state"), ("InstanceType", "instanceType"), ("GroupName", "groupName"),
    ("AvailabilityZoneId", "availabilityZoneId"), ("AvailabilityZone", "availabilityZone"),
]
INSTANCE_FIELDS = [
    ("InstanceId", "instanceId"), ("InstanceType", "instanceType"), ("GroupName", "groupName"),
    ("AvailabilityZone", "availabilityZone"), ("ZoneId", "zoneId"), ("CapacityBlockId", "capacityBlockId"),
]


def answer_topology(action, form):
    if action == "DescribeCapacityReservationTopology":
        ids = listed(form, "CapacityReservationId")
        if ids and "MaxResults" in form:
            return ec2_error("InvalidParameterCombination", "MaxResults cannot be used with CapacityReservationIds")
        if len(ids) > 100:
            return ec2_error("InvalidParameterValue", "at most 100 CapacityReservationIds")
        bad = topology_filters_ok(form, ("availability-zone", "instance-type"))
        if bad:
            return bad
        known = {r["CapacityReservationId"]: r for r in read_json("LOOPBACK_RESERVATION_TOPOLOGY", "CapacityReservations")}
        with LOCK:
            for b in BLOCKS:
                # Not pending or active: EC2 gives no network nodes.
                known.setdefault(b["id"], {
                    "CapacityReservationId": b["id"], "State": b["state"], "InstanceType": b["type"],
                    "AvailabilityZone": b["zone"], "NetworkNodes": [],
                })
        chosen = [known[i] for i in ids if i in known] if ids else list(known.values())
        fields = {"availability-zone": "AvailabilityZone", "instance-type": "InstanceType"}
        chosen = [r for r in chosen if filter_match(r, filters_of(form), fields)]
        items = "".join(topology_item(RESERVATION_FIELDS, r) for r in chosen)
        return (
            f'<DescribeCapacityReservationTopologyResponse xmlns="{EC2_NS}"><requestId>loopback-topology</requestId>'
            f"<capacityReservationSet>{items}</capacityReservationSet>"
            "</DescribeCapacityReservationTopologyResponse>"
        )
    if action == "DescribeInstanceTopology":
        ids = listed(form, "InstanceId")
        groups = listed(form, "GroupName")
        if ids and "MaxResults" in form:
            return ec2_error("InvalidParameterCombination", "MaxResults cannot be used with InstanceIds")
        if len(ids) > 100 or len(groups) > 100:
            return ec2_error("InvalidParameterValue", "at most 100 InstanceIds and 100 GroupNames")
        bad = topology_filters_ok(form, ("availability-zone", "instance-type", "zone-id"))
        if bad:
            return bad
        chosen = read_json("LOOPBACK_INSTANCE_TOPOLOGY", "Instances")
        if ids:
            chosen = [i for i in chosen if i["InstanceId"] in ids]
        if groups:
            chosen = [i for i in chosen if i.get("GroupName") in groups]
        fields = {"availability-zone": "AvailabilityZone", "instance-type": "InstanceType", "zone-id": "ZoneId"}
        chosen = [i for i in chosen if filter_match(i, filters_of(form), fields)]
        token = ""
        if not ids:
            start = int(form.get("NextToken") or 0)
            size = int(form.get("MaxResults") or 20)
            if start + size < len(chosen):
                token = f"<nextToken>{start + size}</nextToken>"
            chosen = chosen[start:start + size]
        items = "".join(topology_item(INSTANCE_FIELDS, i) for i in chosen)
        return (
            f'<DescribeInstanceTopologyResponse xmlns="{EC2_NS}"><requestId>loopback-topology</requestId>'
            f"<instanceSet>{items}</instanceSet>{token}"
            "</DescribeInstanceTopologyResponse>"
        )
    return None


def answer_json(target, body):
    """The JSON body for an AWS JSON-protocol request this answers itself, or None."""
    name = body.get("Name", "")
    if target == "AmazonSSM.GetParameter" and name.startswith("/aws/service/eks/optimized-ami/"):
        return json.dumps({"Parameter": {
            "Name": name, "Type": "String", "Value": "ami-0f0e0d0c0b0a09080",
            "Version": 1, "DataType": "aws:ec2:image",
        }})
    if target == "ServiceQuotasV20190624.ListServiceQuotas" and body.get("ServiceCode") == "fsx":
        gib = float(os.environ.get("LOOPBACK_FSX_QUOTA_GIB", "100800"))
        return json.dumps({"Quotas": [{
            "ServiceCode": "fsx",
            "QuotaCode": "L-LOOPBACK",
            "QuotaName": "Lustre Persistent SSD storage capacity (GiB)",
            "Value": gib,
            "Unit": "None",
            "Adjustable": True,
            "GlobalQuota": False,
        }]})
    return None


def answer(form):
    """The XML body for a request this answers itself, or None to pass it to moto."""
    action = form.get("Action")
    mine = answer_capacity_blocks(action, form)
    if mine is not None:
        return mine
    mine = answer_topology(action, form)
    if mine is not None:
        return mine
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
        if mine is None and target:
            try:
                request = json.loads(body or b"{}")
            except ValueError:
                request = {}
            mine, kind = answer_json(target, request), "application/x-amz-json-1.1"
        if mine is None and not form and not target:
            mine, kind = answer_rest(method, self.path), "application/json"
        if mine is not None:
            self._record("answerer", form, target)
            status, mine = mine if isinstance(mine, tuple) else (200, mine)
            data = mine.encode("utf-8")
            self.send_response(status)
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
