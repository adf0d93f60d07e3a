"""Drives Islet's device API through pypushwoosh, a third-party Pushwoosh client (issue 3).

The client keeps its default JSON envelope; only its host is pointed at Islet and an
Authorization header is added, as an app would do. Exits non-zero on the first mismatch.
Usage: pypushwoosh_devices.py PORT APPLICATION DEVICE_TOKEN
"""
import sys

from pypushwoosh.client import PushwooshClient
from pypushwoosh.command import GetTagsCommand, RegisterDeviceCommand, SetTagsCommand, UnregisterDeviceCommand

port, application, device_token = sys.argv[1:4]


class IsletClient(PushwooshClient):
    scheme = "http"
    hostname = "127.0.0.1:%s" % port
    headers = dict(PushwooshClient.headers, Authorization="Token " + device_token)


client = IsletClient(timeout=10)


def expect(response, status=200, message=None):
    if response.get("status_code") != status or (message is not None and response.get("status_message") != message):
        sys.exit("unexpected answer: %r (wanted %s %r)" % (response, status, message))
    return response


token = "C0FFEE" * 10 + "ABCD"
expect(client.invoke(RegisterDeviceCommand(application, "py-device", 1, token, language="pt", timezone=3600)))
expect(client.invoke(SetTagsCommand(application, "py-device", {"Level": 7, "Sports": ["ski", "golf"], "City": "Porto"})))
expect(client.invoke(SetTagsCommand(application, "py-device", {"City": None})))

tags = expect(client.invoke(GetTagsCommand(application, "py-device")))["response"]["result"]
wanted = {"Language": "pt", "Timezone": "3600", "Level": 7, "Sports": ["golf", "ski"]}
if tags != wanted:
    sys.exit("getTags answered %r, wanted %r" % (tags, wanted))

clash = expect(client.invoke(SetTagsCommand(application, "py-device", {"Level": "high", "Team": "red"})))["response"]
if [t["tag"] for t in clash.get("skipped_tags", [])] != ["Level"]:
    sys.exit("a clashing tag should be skipped and named, the rest stored: %r" % clash)
expect(client.invoke(RegisterDeviceCommand(application, "py-device", 7, token)), 400,
       "device_type: must be 1 (iOS) or 3 (Android)")
# Tags set before registration are kept for the device (issue 45), and read back as Pushwoosh answers them.
expect(client.invoke(SetTagsCommand(application, "py-early", {"a": "b"})))
early = expect(client.invoke(GetTagsCommand(application, "py-early")))["response"]["result"]
if early != {"a": "b"}:
    sys.exit("tags set before registration: %r" % early)
unknown = expect(client.invoke(GetTagsCommand(application, "nobody")))["response"]["result"]
if unknown != {}:
    sys.exit("getTags of a device never heard of: %r" % unknown)

expect(client.invoke(RegisterDeviceCommand(application, "py-gone", 1, "AB" * 32)))
expect(client.invoke(UnregisterDeviceCommand(application, "py-gone")))
print("pypushwoosh: all device calls answered as expected")
