import Foundation
import Testing
import IsletCore

/// Issue 46: the `android` object of a notification, and how a start's or update's title and content map onto the
/// Android Live Update (and onto the ordinary notification of Android below 16).
@Suite("The android object and the Live Update a notification sends")
struct AndroidContentTests {
    static func read(_ android: JSONValue) throws(APIError) -> AndroidContent? {
        try AndroidContent.read(FieldReader(["android": android] as JSONObject, path: "notifications[0]"))
    }

    static func object(_ bytes: [UInt8]) throws -> JSONObject { try #require(try JSONParser.parse(bytes).objectValue) }

    @Test func everyFieldIsReadAndTheDateBecomesMilliseconds() throws {
        let content = try #require(try Self.read([
            "title": "Order #1", "text": "On its way", "progress": 4, "progress_indeterminate": false, "progress_bar": true,
            "segments": [["color": "#705289", "length": 3], ["color": "#FFE0A030"]], "when": 1_800_000_000, "chronometer": true,
            "chronometer_count_down": true, "show_when": false, "extras": ["eta": "12 min"],
        ]))
        #expect(content.segments == [.init(color: "#705289", length: 3), .init(color: "#FFE0A030", length: 1)], "length defaults to 1, as in the SDK")
        let update = AndroidLiveUpdate(operation: .update, activityID: "ORDER_1", messageCode: "C", title: "ignored", text: "ignored", android: content)
        #expect(update.title == "Order #1" && update.text == "On its way", "the android object's texts win")
        #expect(update.when == 1_800_000_000_000 && update.progress == 4 && update.progressBar == true && update.showWhen == false)
        #expect(try Self.read(.null) == nil)
    }

    @Test(arguments: [
        (["colour": "#000000"], "notifications[0].android.colour: unknown field"),
        (["progress": -1], "notifications[0].android.progress: must be an integer from 0, got -1"),
        (["progress": "3"], "notifications[0].android.progress: must be an integer, got string"),
        (["segments": [["length": 2]]], "notifications[0].android.segments[0].color: is required"),
        (["segments": [["color": "purple"]]], "notifications[0].android.segments[0].color: must be a color as #RRGGBB or #AARRGGBB, got purple"),
        (["segments": [["color": "#12345"]]], "notifications[0].android.segments[0].color: must be a color as #RRGGBB or #AARRGGBB, got #12345"),
        (["segments": [["color": "#123456", "length": 0]]], "notifications[0].android.segments[0].length: must be an integer of at least 1, got 0"),
        (["when": 1_800_000_000_000], "notifications[0].android.when: 1800000000000 seconds since 1970 is the year"),
        (["show_when": "no"], "notifications[0].android.show_when: must be a boolean, got string"),
        ("on", "notifications[0].android: must be an object, got string"),
    ] as [(JSONValue, String)])
    func aWrongFieldIsRefusedByName(android: JSONValue, message: String) {
        #expect {
            _ = try Self.read(android)
        } throws: { error in
            (error as? APIError).map { $0.code == .badRequest && $0.message.hasPrefix(message) } ?? false
        }
    }

    @Test func withoutAnAndroidObjectTheBarIsOffAndTheTitlesComeFromTheNotification() throws {
        let update = AndroidLiveUpdate(operation: .start, activityID: "ORDER_1", messageCode: "C", title: "Food Delivery", text: "Preparing", android: nil)
        #expect(update.progressBar == false, "the SDK draws a bar unless told not to: an empty one says nothing")
        let asked = AndroidLiveUpdate(operation: .update, activityID: "ORDER_1", messageCode: "C", title: nil, text: nil,
                                      android: { var a = AndroidContent(); a.progress = 2; return a }())
        #expect(asked.progressBar == nil && asked.progress == 2, "a progress asks for the bar")
        let data = try Self.object(update.dataBytes)
        #expect(data.keys == ["pw_msg", "header", "title", "p", "pw_live"] && data["header"] == "Food Delivery" && data["p"] == "C")
    }

    @Test func anUpdateWithoutTextsCarriesTheLastOnesAndKeepsItsOwn() throws {
        let start = AndroidLiveUpdate(operation: .start, activityID: "A", messageCode: "S", title: "Match", text: "0 – 0", android: nil).dataBytes
        let silent = AndroidLiveUpdate(operation: .update, activityID: "A", messageCode: "U", title: nil, text: nil, android: nil).dataBytes
        #expect(AndroidPush.lacksTexts(silent) && !AndroidPush.lacksTexts(start))
        let carried = try Self.object(AndroidPush.liveUpdate(silent, carrying: [start]))
        #expect(carried["header"] == "Match" && carried["title"] == "0 – 0" && carried["p"] == "U")
        #expect(carried.keys == ["pw_msg", "header", "title", "p", "pw_live"], "in the order the SDK's keys are written")
        let scored = AndroidLiveUpdate(operation: .update, activityID: "A", messageCode: "V", title: nil, text: "1 – 0", android: nil).dataBytes
        let kept = try Self.object(AndroidPush.liveUpdate(scored, carrying: [start]))
        #expect(kept["header"] == "Match" && kept["title"] == "1 – 0", "its own text stays")
        #expect(AndroidPush.liveUpdate(silent, carrying: []) == silent, "nothing earlier: as it is")
    }

    @Test func belowAndroid16TheStartIsAnOrdinaryNotification() throws {
        let start = AndroidLiveUpdate(operation: .start, activityID: "A", messageCode: "S", title: "Match", text: "Kick-off", android: nil).dataBytes
        let notification = try Self.object(try #require(AndroidPush.notification(start)))
        #expect(notification["pw_live"] == nil && notification["header"] == "Match" && notification["pw_msg"] == "1")
        let end = AndroidLiveUpdate(operation: .end, activityID: "A", messageCode: "E", title: nil, text: nil, android: nil).dataBytes
        #expect(AndroidPush.notification(end) == nil, "nothing to show")
        #expect(AndroidPush.showsLiveUpdates(osVersion: "16") && AndroidPush.showsLiveUpdates(osVersion: "16.0") && AndroidPush.showsLiveUpdates(osVersion: nil))
        #expect(!AndroidPush.showsLiveUpdates(osVersion: "15") && !AndroidPush.showsLiveUpdates(osVersion: "14.1"))
    }

    @Test func dataPastFCMsLimitIsRefusedNamingTheAndroidObject() throws {
        var android = AndroidContent()
        android.extras = ["note": .string(String(repeating: "x", count: 4000))]
        let data = AndroidLiveUpdate(operation: .start, activityID: "A", messageCode: "S", title: "t", text: nil, android: android).dataBytes
        #expect(throws: APIError.self) { try AndroidLiveUpdate.checkSize(data, path: "notifications[0]") }
        let small = AndroidLiveUpdate(operation: .start, activityID: "A", messageCode: "S", title: "t", text: nil, android: nil).dataBytes
        try AndroidLiveUpdate.checkSize(small, path: "notifications[0]")
    }
}
