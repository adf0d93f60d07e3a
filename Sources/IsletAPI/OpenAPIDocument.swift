/// The OpenAPI 3.1 description of every route Islet serves, answered at `GET /openapi.json`.
public enum OpenAPIDocument {
    public static let json = #"""
    {
      "openapi": "3.1.0",
      "info": {
        "title": "Islet",
        "version": "1.3",
        "summary": "A drop-in for the Pushwoosh iOS Live Activities API (JSON API 1.3).",
        "description": "Islet serves the Pushwoosh-compatible JSON API 1.3 for iOS Live Activities, and its own extensions (filters, schemas, message details, dry runs), and sends the pushes to APNs.\n\nEvery JSON API call is `POST /json/1.3/<method>` with a JSON body `{\"request\": {...}}` whose object holds the method's fields. Every answer, success or failure, is the envelope `{\"status_code\", \"status_message\", \"response\"}`; `status_code` equals the HTTP status and a failure has `response: null` and a message naming the field by its path relative to `request` (e.g. `notifications[0].live_activity.content-state: must be an object, got string`). A field sent as `null` counts as absent (except a tag value, where `null` removes the tag); unknown fields are ignored. The JSON parser is strict (no duplicate keys, trailing commas or nesting deeper than 64). Request bodies are limited to 1 MiB. A request takes effect whole or not at all.\n\nAuthentication: server methods take a server API token in `request.auth` (checked first) or the header `Authorization: Token <token>` (`Bearer` is accepted too); device methods (the Pushwoosh SDK's) take the header first and `request.auth` when it is missing, with the application's device API token or a server API token. Since `request.auth` cannot be expressed as a security scheme, the security requirements list an empty alternative `{}`.\n\nThe order of checks: body size (413), path and method name (404), HTTP method (405), JSON and envelope (400), the `application` field's form (400), the token (401), then the method's own fields (400).\n\nThe complete reference, with every rule (E1–E5, D1–D4, S1–S8, U1–U6, A1–A6, X1–X4) and every error message, is docs/API.md."
      },
      "servers": [
        {
          "url": "http://127.0.0.1:8080"
        }
      ],
      "tags": [
        {
          "name": "Device API",
          "description": "What the Pushwoosh iOS SDK calls about its own device (D1–D4)."
        },
        {
          "name": "Server API",
          "description": "Starting, updating and inspecting Live Activities."
        },
        {
          "name": "Filters",
          "description": "Named audiences over device tags (X1)."
        },
        {
          "name": "Schemas",
          "description": "Live Activity schemas (X2)."
        },
        {
          "name": "Operations",
          "description": "Health, metrics and this document."
        },
        {
          "name": "Simulator",
          "description": "The built-in APNs and iPhone simulator (`--apns simulator`)."
        }
      ],
      "paths": {
        "/json/1.3/registerDevice": {
          "post": {
            "operationId": "registerDevice",
            "tags": [
              "Device API"
            ],
            "summary": "Register or update a device",
            "description": "Device API (E3): called by the Pushwoosh iOS SDK with `Authorization: Token <device API token>` (a server API token works too; `request.auth` is used when the header is missing). Answers `{}` (D1).",
            "security": [
              {
                "deviceToken": []
              },
              {
                "serverToken": []
              },
              {}
            ],
            "requestBody": {
              "required": true,
              "description": "`{\"request\": {...}}`; a field sent as `null` counts as absent and unknown fields are ignored.",
              "content": {
                "application/json": {
                  "schema": {
                    "type": "object",
                    "required": [
                      "request"
                    ],
                    "properties": {
                      "request": {
                        "$ref": "#/components/schemas/RegisterDeviceRequest"
                      }
                    }
                  },
                  "example": {
                    "request": {
                      "application": "XXXXX-XXXXX",
                      "hwid": "example_iphone",
                      "push_token": "a1b2c3d4e5f60718293a4b5c6d7e8f900112233445566778899aabbccddeeff0",
                      "device_type": 1,
                      "language": "en",
                      "timezone": 3600,
                      "userId": "user-42",
                      "tags": {
                        "Level": 3
                      }
                    }
                  }
                }
              }
            },
            "responses": {
              "200": {
                "description": "Success.",
                "content": {
                  "application/json": {
                    "schema": {
                      "allOf": [
                        {
                          "$ref": "#/components/schemas/Envelope"
                        }
                      ],
                      "properties": {
                        "status_code": {
                          "const": 200
                        },
                        "status_message": {
                          "const": "OK"
                        },
                        "response": {
                          "$ref": "#/components/schemas/DeviceWriteResponse"
                        }
                      }
                    }
                  }
                }
              },
              "400": {
                "$ref": "#/components/responses/BadRequest"
              },
              "401": {
                "$ref": "#/components/responses/Unauthorized"
              },
              "403": {
                "$ref": "#/components/responses/Forbidden"
              },
              "404": {
                "$ref": "#/components/responses/NotFound"
              },
              "405": {
                "$ref": "#/components/responses/MethodNotAllowed"
              },
              "413": {
                "$ref": "#/components/responses/PayloadTooLarge"
              },
              "429": {
                "$ref": "#/components/responses/TooManyRequests"
              },
              "500": {
                "$ref": "#/components/responses/InternalError"
              },
              "503": {
                "$ref": "#/components/responses/Unavailable"
              }
            }
          }
        },
        "/json/1.3/unregisterDevice": {
          "post": {
            "operationId": "unregisterDevice",
            "tags": [
              "Device API"
            ],
            "summary": "Unregister a device",
            "description": "Device API (E3): called by the Pushwoosh iOS SDK with `Authorization: Token <device API token>` (a server API token works too; `request.auth` is used when the header is missing). Answers `{}` (D2).",
            "security": [
              {
                "deviceToken": []
              },
              {
                "serverToken": []
              },
              {}
            ],
            "requestBody": {
              "required": true,
              "description": "`{\"request\": {...}}`; a field sent as `null` counts as absent and unknown fields are ignored.",
              "content": {
                "application/json": {
                  "schema": {
                    "type": "object",
                    "required": [
                      "request"
                    ],
                    "properties": {
                      "request": {
                        "$ref": "#/components/schemas/UnregisterDeviceRequest"
                      }
                    }
                  },
                  "example": {
                    "request": {
                      "application": "XXXXX-XXXXX",
                      "hwid": "example_iphone"
                    }
                  }
                }
              }
            },
            "responses": {
              "200": {
                "description": "Success.",
                "content": {
                  "application/json": {
                    "schema": {
                      "allOf": [
                        {
                          "$ref": "#/components/schemas/Envelope"
                        }
                      ],
                      "properties": {
                        "status_code": {
                          "const": 200
                        },
                        "status_message": {
                          "const": "OK"
                        },
                        "response": {
                          "$ref": "#/components/schemas/EmptyResponse"
                        }
                      }
                    }
                  }
                }
              },
              "400": {
                "$ref": "#/components/responses/BadRequest"
              },
              "401": {
                "$ref": "#/components/responses/Unauthorized"
              },
              "403": {
                "$ref": "#/components/responses/Forbidden"
              },
              "404": {
                "$ref": "#/components/responses/NotFound"
              },
              "405": {
                "$ref": "#/components/responses/MethodNotAllowed"
              },
              "413": {
                "$ref": "#/components/responses/PayloadTooLarge"
              },
              "429": {
                "$ref": "#/components/responses/TooManyRequests"
              },
              "500": {
                "$ref": "#/components/responses/InternalError"
              },
              "503": {
                "$ref": "#/components/responses/Unavailable"
              }
            }
          }
        },
        "/json/1.3/setTags": {
          "post": {
            "operationId": "setTags",
            "tags": [
              "Device API"
            ],
            "summary": "Set a device's tags",
            "description": "Device API (E3): called by the Pushwoosh iOS SDK with `Authorization: Token <device API token>` (a server API token works too; `request.auth` is used when the header is missing). Answers `{}` (D2); an unknown `hwid` is a 400.",
            "security": [
              {
                "deviceToken": []
              },
              {
                "serverToken": []
              },
              {}
            ],
            "requestBody": {
              "required": true,
              "description": "`{\"request\": {...}}`; a field sent as `null` counts as absent and unknown fields are ignored.",
              "content": {
                "application/json": {
                  "schema": {
                    "type": "object",
                    "required": [
                      "request"
                    ],
                    "properties": {
                      "request": {
                        "$ref": "#/components/schemas/SetTagsRequest"
                      }
                    }
                  },
                  "example": {
                    "request": {
                      "application": "XXXXX-XXXXX",
                      "hwid": "example_iphone",
                      "tags": {
                        "Level": 4,
                        "Topics": [
                          "news",
                          "sport"
                        ]
                      }
                    }
                  }
                }
              }
            },
            "responses": {
              "200": {
                "description": "Success.",
                "content": {
                  "application/json": {
                    "schema": {
                      "allOf": [
                        {
                          "$ref": "#/components/schemas/Envelope"
                        }
                      ],
                      "properties": {
                        "status_code": {
                          "const": 200
                        },
                        "status_message": {
                          "const": "OK"
                        },
                        "response": {
                          "$ref": "#/components/schemas/DeviceWriteResponse"
                        }
                      }
                    }
                  }
                }
              },
              "400": {
                "$ref": "#/components/responses/BadRequest"
              },
              "401": {
                "$ref": "#/components/responses/Unauthorized"
              },
              "403": {
                "$ref": "#/components/responses/Forbidden"
              },
              "404": {
                "$ref": "#/components/responses/NotFound"
              },
              "405": {
                "$ref": "#/components/responses/MethodNotAllowed"
              },
              "413": {
                "$ref": "#/components/responses/PayloadTooLarge"
              },
              "429": {
                "$ref": "#/components/responses/TooManyRequests"
              },
              "500": {
                "$ref": "#/components/responses/InternalError"
              },
              "503": {
                "$ref": "#/components/responses/Unavailable"
              }
            }
          }
        },
        "/json/1.3/getTags": {
          "post": {
            "operationId": "getTags",
            "tags": [
              "Device API"
            ],
            "summary": "Get a device's tags",
            "description": "Device API (E3): called by the Pushwoosh iOS SDK with `Authorization: Token <device API token>` (a server API token works too; `request.auth` is used when the header is missing). Answers the tags under `result` (D2).",
            "security": [
              {
                "deviceToken": []
              },
              {
                "serverToken": []
              },
              {}
            ],
            "requestBody": {
              "required": true,
              "description": "`{\"request\": {...}}`; a field sent as `null` counts as absent and unknown fields are ignored.",
              "content": {
                "application/json": {
                  "schema": {
                    "type": "object",
                    "required": [
                      "request"
                    ],
                    "properties": {
                      "request": {
                        "$ref": "#/components/schemas/GetTagsRequest"
                      }
                    }
                  },
                  "example": {
                    "request": {
                      "application": "XXXXX-XXXXX",
                      "hwid": "example_iphone"
                    }
                  }
                }
              }
            },
            "responses": {
              "200": {
                "description": "Success.",
                "content": {
                  "application/json": {
                    "schema": {
                      "allOf": [
                        {
                          "$ref": "#/components/schemas/Envelope"
                        }
                      ],
                      "properties": {
                        "status_code": {
                          "const": 200
                        },
                        "status_message": {
                          "const": "OK"
                        },
                        "response": {
                          "$ref": "#/components/schemas/GetTagsResponse"
                        }
                      }
                    }
                  }
                }
              },
              "400": {
                "$ref": "#/components/responses/BadRequest"
              },
              "401": {
                "$ref": "#/components/responses/Unauthorized"
              },
              "403": {
                "$ref": "#/components/responses/Forbidden"
              },
              "404": {
                "$ref": "#/components/responses/NotFound"
              },
              "405": {
                "$ref": "#/components/responses/MethodNotAllowed"
              },
              "413": {
                "$ref": "#/components/responses/PayloadTooLarge"
              },
              "429": {
                "$ref": "#/components/responses/TooManyRequests"
              },
              "500": {
                "$ref": "#/components/responses/InternalError"
              },
              "503": {
                "$ref": "#/components/responses/Unavailable"
              }
            }
          }
        },
        "/json/1.3/setActivityPushToStartToken": {
          "post": {
            "operationId": "setActivityPushToStartToken",
            "tags": [
              "Device API"
            ],
            "summary": "Store a push-to-start token",
            "description": "Device API (E3): called by the Pushwoosh iOS SDK with `Authorization: Token <device API token>` (a server API token works too; `request.auth` is used when the header is missing). Answers `{}` (D3).",
            "security": [
              {
                "deviceToken": []
              },
              {
                "serverToken": []
              },
              {}
            ],
            "requestBody": {
              "required": true,
              "description": "`{\"request\": {...}}`; a field sent as `null` counts as absent and unknown fields are ignored.",
              "content": {
                "application/json": {
                  "schema": {
                    "type": "object",
                    "required": [
                      "request"
                    ],
                    "properties": {
                      "request": {
                        "$ref": "#/components/schemas/SetActivityPushToStartTokenRequest"
                      }
                    }
                  },
                  "example": {
                    "request": {
                      "application": "XXXXX-XXXXX",
                      "hwid": "example_iphone",
                      "activity_push_to_start_token": "a1b2c3d4e5f60718293a4b5c6d7e8f900112233445566778899aabbccddeeff0",
                      "attributes_type": "FoodDeliveryAttributes"
                    }
                  }
                }
              }
            },
            "responses": {
              "200": {
                "description": "Success.",
                "content": {
                  "application/json": {
                    "schema": {
                      "allOf": [
                        {
                          "$ref": "#/components/schemas/Envelope"
                        }
                      ],
                      "properties": {
                        "status_code": {
                          "const": 200
                        },
                        "status_message": {
                          "const": "OK"
                        },
                        "response": {
                          "$ref": "#/components/schemas/EmptyResponse"
                        }
                      }
                    }
                  }
                }
              },
              "400": {
                "$ref": "#/components/responses/BadRequest"
              },
              "401": {
                "$ref": "#/components/responses/Unauthorized"
              },
              "403": {
                "$ref": "#/components/responses/Forbidden"
              },
              "404": {
                "$ref": "#/components/responses/NotFound"
              },
              "405": {
                "$ref": "#/components/responses/MethodNotAllowed"
              },
              "413": {
                "$ref": "#/components/responses/PayloadTooLarge"
              },
              "429": {
                "$ref": "#/components/responses/TooManyRequests"
              },
              "500": {
                "$ref": "#/components/responses/InternalError"
              },
              "503": {
                "$ref": "#/components/responses/Unavailable"
              }
            }
          }
        },
        "/json/1.3/setActivityToken": {
          "post": {
            "operationId": "setActivityToken",
            "tags": [
              "Device API"
            ],
            "summary": "Report an activity's update token",
            "description": "Device API (E3): called by the Pushwoosh iOS SDK with `Authorization: Token <device API token>` (a server API token works too; `request.auth` is used when the header is missing). Answers `{}` (D4). A device may be refused (403) an activity it may not join.",
            "security": [
              {
                "deviceToken": []
              },
              {
                "serverToken": []
              },
              {}
            ],
            "requestBody": {
              "required": true,
              "description": "`{\"request\": {...}}`; a field sent as `null` counts as absent and unknown fields are ignored.",
              "content": {
                "application/json": {
                  "schema": {
                    "type": "object",
                    "required": [
                      "request"
                    ],
                    "properties": {
                      "request": {
                        "$ref": "#/components/schemas/SetActivityTokenRequest"
                      }
                    }
                  },
                  "example": {
                    "request": {
                      "application": "XXXXX-XXXXX",
                      "hwid": "example_iphone",
                      "activity_id": "FIRST_LIVE_ACTIVITY",
                      "activity_token": "a1b2c3d4e5f60718293a4b5c6d7e8f900112233445566778899aabbccddeeff0"
                    }
                  }
                }
              }
            },
            "responses": {
              "200": {
                "description": "Success.",
                "content": {
                  "application/json": {
                    "schema": {
                      "allOf": [
                        {
                          "$ref": "#/components/schemas/Envelope"
                        }
                      ],
                      "properties": {
                        "status_code": {
                          "const": 200
                        },
                        "status_message": {
                          "const": "OK"
                        },
                        "response": {
                          "$ref": "#/components/schemas/EmptyResponse"
                        }
                      }
                    }
                  }
                }
              },
              "400": {
                "$ref": "#/components/responses/BadRequest"
              },
              "401": {
                "$ref": "#/components/responses/Unauthorized"
              },
              "403": {
                "$ref": "#/components/responses/Forbidden"
              },
              "404": {
                "$ref": "#/components/responses/NotFound"
              },
              "405": {
                "$ref": "#/components/responses/MethodNotAllowed"
              },
              "413": {
                "$ref": "#/components/responses/PayloadTooLarge"
              },
              "429": {
                "$ref": "#/components/responses/TooManyRequests"
              },
              "500": {
                "$ref": "#/components/responses/InternalError"
              },
              "503": {
                "$ref": "#/components/responses/Unavailable"
              }
            }
          }
        },
        "/json/1.3/getApplication": {
          "post": {
            "operationId": "getApplication",
            "tags": [
              "Server API"
            ],
            "summary": "The calling application",
            "description": "Server API (E2): a server API token in `request.auth` (checked first) or `Authorization: Token <token>`; `application` is optional. Answers the application's public facts.",
            "security": [
              {
                "serverToken": []
              },
              {}
            ],
            "requestBody": {
              "required": true,
              "description": "`{\"request\": {...}}`; a field sent as `null` counts as absent and unknown fields are ignored.",
              "content": {
                "application/json": {
                  "schema": {
                    "type": "object",
                    "required": [
                      "request"
                    ],
                    "properties": {
                      "request": {
                        "$ref": "#/components/schemas/GetApplicationRequest"
                      }
                    }
                  },
                  "example": {
                    "request": {
                      "application": "XXXXX-XXXXX",
                      "auth": "SECRET_API_TOKEN"
                    }
                  }
                }
              }
            },
            "responses": {
              "200": {
                "description": "Success.",
                "content": {
                  "application/json": {
                    "schema": {
                      "allOf": [
                        {
                          "$ref": "#/components/schemas/Envelope"
                        }
                      ],
                      "properties": {
                        "status_code": {
                          "const": 200
                        },
                        "status_message": {
                          "const": "OK"
                        },
                        "response": {
                          "$ref": "#/components/schemas/GetApplicationResponse"
                        }
                      }
                    }
                  }
                }
              },
              "400": {
                "$ref": "#/components/responses/BadRequest"
              },
              "401": {
                "$ref": "#/components/responses/Unauthorized"
              },
              "403": {
                "$ref": "#/components/responses/Forbidden"
              },
              "404": {
                "$ref": "#/components/responses/NotFound"
              },
              "405": {
                "$ref": "#/components/responses/MethodNotAllowed"
              },
              "413": {
                "$ref": "#/components/responses/PayloadTooLarge"
              },
              "429": {
                "$ref": "#/components/responses/TooManyRequests"
              },
              "500": {
                "$ref": "#/components/responses/InternalError"
              },
              "503": {
                "$ref": "#/components/responses/Unavailable"
              }
            }
          }
        },
        "/json/1.3/startLiveActivity": {
          "post": {
            "operationId": "startLiveActivity",
            "tags": [
              "Server API"
            ],
            "summary": "Start Live Activities",
            "description": "Server API (E2): a server API token in `request.auth` (checked first) or `Authorization: Token <token>`; `application` is optional. Answers one message code per notification (E5), plus `warnings` when a schema found unknown fields (X2); a dry run answers the pushes instead (X3).",
            "security": [
              {
                "serverToken": []
              },
              {}
            ],
            "requestBody": {
              "required": true,
              "description": "`{\"request\": {...}}`; a field sent as `null` counts as absent and unknown fields are ignored.",
              "content": {
                "application/json": {
                  "schema": {
                    "type": "object",
                    "required": [
                      "request"
                    ],
                    "properties": {
                      "request": {
                        "$ref": "#/components/schemas/StartLiveActivityRequest"
                      }
                    }
                  },
                  "example": {
                    "request": {
                      "application": "XXXXX-XXXXX",
                      "auth": "SECRET_API_TOKEN",
                      "notifications": [
                        {
                          "content": "Your order is being prepared",
                          "title": "Food Delivery",
                          "apns_priority": 10,
                          "live_activity": {
                            "event": "start",
                            "title": "Order status",
                            "content-state": {
                              "status": "Third",
                              "estimatedTime": "37 min"
                            },
                            "attributes-type": "FoodDeliveryAttributes",
                            "attributes": {}
                          },
                          "live_activity_id": "FIRST_LIVE_ACTIVITY",
                          "filter": "FILTER_NAME_1"
                        }
                      ]
                    }
                  }
                }
              }
            },
            "responses": {
              "200": {
                "description": "Success.",
                "content": {
                  "application/json": {
                    "schema": {
                      "allOf": [
                        {
                          "$ref": "#/components/schemas/Envelope"
                        }
                      ],
                      "properties": {
                        "status_code": {
                          "const": 200
                        },
                        "status_message": {
                          "const": "OK"
                        },
                        "response": {
                          "$ref": "#/components/schemas/MessagesResponse"
                        }
                      }
                    }
                  }
                }
              },
              "400": {
                "$ref": "#/components/responses/BadRequest"
              },
              "401": {
                "$ref": "#/components/responses/Unauthorized"
              },
              "403": {
                "$ref": "#/components/responses/Forbidden"
              },
              "404": {
                "$ref": "#/components/responses/NotFound"
              },
              "405": {
                "$ref": "#/components/responses/MethodNotAllowed"
              },
              "413": {
                "$ref": "#/components/responses/PayloadTooLarge"
              },
              "429": {
                "$ref": "#/components/responses/TooManyRequests"
              },
              "500": {
                "$ref": "#/components/responses/InternalError"
              },
              "503": {
                "$ref": "#/components/responses/Unavailable"
              }
            }
          }
        },
        "/json/1.3/updateLiveActivity": {
          "post": {
            "operationId": "updateLiveActivity",
            "tags": [
              "Server API"
            ],
            "summary": "Update or end Live Activities",
            "description": "Server API (E2): a server API token in `request.auth` (checked first) or `Authorization: Token <token>`; `application` is optional. Answers one message code per notification (E5), plus `warnings` (X2); a dry run answers the pushes instead (X3).",
            "security": [
              {
                "serverToken": []
              },
              {}
            ],
            "requestBody": {
              "required": true,
              "description": "`{\"request\": {...}}`; a field sent as `null` counts as absent and unknown fields are ignored.",
              "content": {
                "application/json": {
                  "schema": {
                    "type": "object",
                    "required": [
                      "request"
                    ],
                    "properties": {
                      "request": {
                        "$ref": "#/components/schemas/UpdateLiveActivityRequest"
                      }
                    }
                  },
                  "example": {
                    "request": {
                      "application": "XXXXX-XXXXX",
                      "auth": "SECRET_API_TOKEN",
                      "notifications": [
                        {
                          "live_activity": {
                            "event": "update",
                            "content-state": {
                              "status": "Second",
                              "estimatedTime": "20 min"
                            },
                            "relevance-score": 50,
                            "stale-date": 1767229200
                          },
                          "live_activity_id": "FIRST_LIVE_ACTIVITY"
                        }
                      ]
                    }
                  }
                }
              }
            },
            "responses": {
              "200": {
                "description": "Success.",
                "content": {
                  "application/json": {
                    "schema": {
                      "allOf": [
                        {
                          "$ref": "#/components/schemas/Envelope"
                        }
                      ],
                      "properties": {
                        "status_code": {
                          "const": 200
                        },
                        "status_message": {
                          "const": "OK"
                        },
                        "response": {
                          "$ref": "#/components/schemas/MessagesResponse"
                        }
                      }
                    }
                  }
                }
              },
              "400": {
                "$ref": "#/components/responses/BadRequest"
              },
              "401": {
                "$ref": "#/components/responses/Unauthorized"
              },
              "403": {
                "$ref": "#/components/responses/Forbidden"
              },
              "404": {
                "$ref": "#/components/responses/NotFound"
              },
              "405": {
                "$ref": "#/components/responses/MethodNotAllowed"
              },
              "413": {
                "$ref": "#/components/responses/PayloadTooLarge"
              },
              "429": {
                "$ref": "#/components/responses/TooManyRequests"
              },
              "500": {
                "$ref": "#/components/responses/InternalError"
              },
              "503": {
                "$ref": "#/components/responses/Unavailable"
              }
            }
          }
        },
        "/json/1.3/deleteMessage": {
          "post": {
            "operationId": "deleteMessage",
            "tags": [
              "Server API"
            ],
            "summary": "Cancel a start that has not fired",
            "description": "Server API (E2): a server API token in `request.auth` (checked first) or `Authorization: Token <token>`; `application` is optional. Answers `{}`. Updates, ends, and starts being sent, done or cancelled are refused (400).",
            "security": [
              {
                "serverToken": []
              },
              {}
            ],
            "requestBody": {
              "required": true,
              "description": "`{\"request\": {...}}`; a field sent as `null` counts as absent and unknown fields are ignored.",
              "content": {
                "application/json": {
                  "schema": {
                    "type": "object",
                    "required": [
                      "request"
                    ],
                    "properties": {
                      "request": {
                        "$ref": "#/components/schemas/DeleteMessageRequest"
                      }
                    }
                  },
                  "example": {
                    "request": {
                      "auth": "SECRET_API_TOKEN",
                      "message": "Q3J7B-0D8XK2LM-7TPA94ZC"
                    }
                  }
                }
              }
            },
            "responses": {
              "200": {
                "description": "Success.",
                "content": {
                  "application/json": {
                    "schema": {
                      "allOf": [
                        {
                          "$ref": "#/components/schemas/Envelope"
                        }
                      ],
                      "properties": {
                        "status_code": {
                          "const": 200
                        },
                        "status_message": {
                          "const": "OK"
                        },
                        "response": {
                          "$ref": "#/components/schemas/EmptyResponse"
                        }
                      }
                    }
                  }
                }
              },
              "400": {
                "$ref": "#/components/responses/BadRequest"
              },
              "401": {
                "$ref": "#/components/responses/Unauthorized"
              },
              "403": {
                "$ref": "#/components/responses/Forbidden"
              },
              "404": {
                "$ref": "#/components/responses/NotFound"
              },
              "405": {
                "$ref": "#/components/responses/MethodNotAllowed"
              },
              "413": {
                "$ref": "#/components/responses/PayloadTooLarge"
              },
              "429": {
                "$ref": "#/components/responses/TooManyRequests"
              },
              "500": {
                "$ref": "#/components/responses/InternalError"
              },
              "503": {
                "$ref": "#/components/responses/Unavailable"
              }
            }
          }
        },
        "/json/1.3/getMessageDetails": {
          "post": {
            "operationId": "getMessageDetails",
            "tags": [
              "Server API"
            ],
            "summary": "A message's status and counts",
            "description": "Server API (E2): a server API token in `request.auth` (checked first) or `Authorization: Token <token>`; `application` is optional. Answers the message's status and per-device counts (X4).",
            "security": [
              {
                "serverToken": []
              },
              {}
            ],
            "requestBody": {
              "required": true,
              "description": "`{\"request\": {...}}`; a field sent as `null` counts as absent and unknown fields are ignored.",
              "content": {
                "application/json": {
                  "schema": {
                    "type": "object",
                    "required": [
                      "request"
                    ],
                    "properties": {
                      "request": {
                        "$ref": "#/components/schemas/GetMessageDetailsRequest"
                      }
                    }
                  },
                  "example": {
                    "request": {
                      "auth": "SECRET_API_TOKEN",
                      "message": "Q3J7B-0D8XK2LM-7TPA94ZC"
                    }
                  }
                }
              }
            },
            "responses": {
              "200": {
                "description": "Success.",
                "content": {
                  "application/json": {
                    "schema": {
                      "allOf": [
                        {
                          "$ref": "#/components/schemas/Envelope"
                        }
                      ],
                      "properties": {
                        "status_code": {
                          "const": 200
                        },
                        "status_message": {
                          "const": "OK"
                        },
                        "response": {
                          "$ref": "#/components/schemas/MessageDetailsResponse"
                        }
                      }
                    }
                  }
                }
              },
              "400": {
                "$ref": "#/components/responses/BadRequest"
              },
              "401": {
                "$ref": "#/components/responses/Unauthorized"
              },
              "403": {
                "$ref": "#/components/responses/Forbidden"
              },
              "404": {
                "$ref": "#/components/responses/NotFound"
              },
              "405": {
                "$ref": "#/components/responses/MethodNotAllowed"
              },
              "413": {
                "$ref": "#/components/responses/PayloadTooLarge"
              },
              "429": {
                "$ref": "#/components/responses/TooManyRequests"
              },
              "500": {
                "$ref": "#/components/responses/InternalError"
              },
              "503": {
                "$ref": "#/components/responses/Unavailable"
              }
            }
          }
        },
        "/json/1.3/getLiveActivity": {
          "post": {
            "operationId": "getLiveActivity",
            "tags": [
              "Server API"
            ],
            "summary": "An activity and its devices",
            "description": "Server API (E2): a server API token in `request.auth` (checked first) or `Authorization: Token <token>`; `application` is optional. Answers the activity, its last content-state and its first 1,000 devices (X4).",
            "security": [
              {
                "serverToken": []
              },
              {}
            ],
            "requestBody": {
              "required": true,
              "description": "`{\"request\": {...}}`; a field sent as `null` counts as absent and unknown fields are ignored.",
              "content": {
                "application/json": {
                  "schema": {
                    "type": "object",
                    "required": [
                      "request"
                    ],
                    "properties": {
                      "request": {
                        "$ref": "#/components/schemas/GetLiveActivityRequest"
                      }
                    }
                  },
                  "example": {
                    "request": {
                      "auth": "SECRET_API_TOKEN",
                      "live_activity_id": "FIRST_LIVE_ACTIVITY"
                    }
                  }
                }
              }
            },
            "responses": {
              "200": {
                "description": "Success.",
                "content": {
                  "application/json": {
                    "schema": {
                      "allOf": [
                        {
                          "$ref": "#/components/schemas/Envelope"
                        }
                      ],
                      "properties": {
                        "status_code": {
                          "const": 200
                        },
                        "status_message": {
                          "const": "OK"
                        },
                        "response": {
                          "$ref": "#/components/schemas/LiveActivityResponse"
                        }
                      }
                    }
                  }
                }
              },
              "400": {
                "$ref": "#/components/responses/BadRequest"
              },
              "401": {
                "$ref": "#/components/responses/Unauthorized"
              },
              "403": {
                "$ref": "#/components/responses/Forbidden"
              },
              "404": {
                "$ref": "#/components/responses/NotFound"
              },
              "405": {
                "$ref": "#/components/responses/MethodNotAllowed"
              },
              "413": {
                "$ref": "#/components/responses/PayloadTooLarge"
              },
              "429": {
                "$ref": "#/components/responses/TooManyRequests"
              },
              "500": {
                "$ref": "#/components/responses/InternalError"
              },
              "503": {
                "$ref": "#/components/responses/Unavailable"
              }
            }
          }
        },
        "/json/1.3/createFilter": {
          "post": {
            "operationId": "createFilter",
            "tags": [
              "Filters"
            ],
            "summary": "Create a filter",
            "description": "Server API (E2): a server API token in `request.auth` (checked first) or `Authorization: Token <token>`; `application` is optional. Answers the filter as stored (X1).",
            "security": [
              {
                "serverToken": []
              },
              {}
            ],
            "requestBody": {
              "required": true,
              "description": "`{\"request\": {...}}`; a field sent as `null` counts as absent and unknown fields are ignored.",
              "content": {
                "application/json": {
                  "schema": {
                    "type": "object",
                    "required": [
                      "request"
                    ],
                    "properties": {
                      "request": {
                        "$ref": "#/components/schemas/CreateFilterRequest"
                      }
                    }
                  },
                  "example": {
                    "request": {
                      "auth": "SECRET_API_TOKEN",
                      "name": "ios17_fans",
                      "operator": "AND",
                      "conditions": [
                        [
                          "OS Version",
                          "GTE",
                          "17.2"
                        ],
                        [
                          "Language",
                          "IN",
                          [
                            "en",
                            "pt"
                          ]
                        ]
                      ]
                    }
                  }
                }
              }
            },
            "responses": {
              "200": {
                "description": "Success.",
                "content": {
                  "application/json": {
                    "schema": {
                      "allOf": [
                        {
                          "$ref": "#/components/schemas/Envelope"
                        }
                      ],
                      "properties": {
                        "status_code": {
                          "const": 200
                        },
                        "status_message": {
                          "const": "OK"
                        },
                        "response": {
                          "$ref": "#/components/schemas/FilterResponse"
                        }
                      }
                    }
                  }
                }
              },
              "400": {
                "$ref": "#/components/responses/BadRequest"
              },
              "401": {
                "$ref": "#/components/responses/Unauthorized"
              },
              "403": {
                "$ref": "#/components/responses/Forbidden"
              },
              "404": {
                "$ref": "#/components/responses/NotFound"
              },
              "405": {
                "$ref": "#/components/responses/MethodNotAllowed"
              },
              "413": {
                "$ref": "#/components/responses/PayloadTooLarge"
              },
              "429": {
                "$ref": "#/components/responses/TooManyRequests"
              },
              "500": {
                "$ref": "#/components/responses/InternalError"
              },
              "503": {
                "$ref": "#/components/responses/Unavailable"
              }
            }
          }
        },
        "/json/1.3/listFilters": {
          "post": {
            "operationId": "listFilters",
            "tags": [
              "Filters"
            ],
            "summary": "List filters",
            "description": "Server API (E2): a server API token in `request.auth` (checked first) or `Authorization: Token <token>`; `application` is optional. Answers every filter of the application (X1).",
            "security": [
              {
                "serverToken": []
              },
              {}
            ],
            "requestBody": {
              "required": true,
              "description": "`{\"request\": {...}}`; a field sent as `null` counts as absent and unknown fields are ignored.",
              "content": {
                "application/json": {
                  "schema": {
                    "type": "object",
                    "required": [
                      "request"
                    ],
                    "properties": {
                      "request": {
                        "$ref": "#/components/schemas/ListFiltersRequest"
                      }
                    }
                  },
                  "example": {
                    "request": {
                      "auth": "SECRET_API_TOKEN"
                    }
                  }
                }
              }
            },
            "responses": {
              "200": {
                "description": "Success.",
                "content": {
                  "application/json": {
                    "schema": {
                      "allOf": [
                        {
                          "$ref": "#/components/schemas/Envelope"
                        }
                      ],
                      "properties": {
                        "status_code": {
                          "const": 200
                        },
                        "status_message": {
                          "const": "OK"
                        },
                        "response": {
                          "$ref": "#/components/schemas/FiltersResponse"
                        }
                      }
                    }
                  }
                }
              },
              "400": {
                "$ref": "#/components/responses/BadRequest"
              },
              "401": {
                "$ref": "#/components/responses/Unauthorized"
              },
              "403": {
                "$ref": "#/components/responses/Forbidden"
              },
              "404": {
                "$ref": "#/components/responses/NotFound"
              },
              "405": {
                "$ref": "#/components/responses/MethodNotAllowed"
              },
              "413": {
                "$ref": "#/components/responses/PayloadTooLarge"
              },
              "429": {
                "$ref": "#/components/responses/TooManyRequests"
              },
              "500": {
                "$ref": "#/components/responses/InternalError"
              },
              "503": {
                "$ref": "#/components/responses/Unavailable"
              }
            }
          }
        },
        "/json/1.3/deleteFilter": {
          "post": {
            "operationId": "deleteFilter",
            "tags": [
              "Filters"
            ],
            "summary": "Delete a filter",
            "description": "Server API (E2): a server API token in `request.auth` (checked first) or `Authorization: Token <token>`; `application` is optional. Answers `{}`; an unknown name is a 400 (X1).",
            "security": [
              {
                "serverToken": []
              },
              {}
            ],
            "requestBody": {
              "required": true,
              "description": "`{\"request\": {...}}`; a field sent as `null` counts as absent and unknown fields are ignored.",
              "content": {
                "application/json": {
                  "schema": {
                    "type": "object",
                    "required": [
                      "request"
                    ],
                    "properties": {
                      "request": {
                        "$ref": "#/components/schemas/DeleteFilterRequest"
                      }
                    }
                  },
                  "example": {
                    "request": {
                      "auth": "SECRET_API_TOKEN",
                      "name": "ios17_fans"
                    }
                  }
                }
              }
            },
            "responses": {
              "200": {
                "description": "Success.",
                "content": {
                  "application/json": {
                    "schema": {
                      "allOf": [
                        {
                          "$ref": "#/components/schemas/Envelope"
                        }
                      ],
                      "properties": {
                        "status_code": {
                          "const": 200
                        },
                        "status_message": {
                          "const": "OK"
                        },
                        "response": {
                          "$ref": "#/components/schemas/EmptyResponse"
                        }
                      }
                    }
                  }
                }
              },
              "400": {
                "$ref": "#/components/responses/BadRequest"
              },
              "401": {
                "$ref": "#/components/responses/Unauthorized"
              },
              "403": {
                "$ref": "#/components/responses/Forbidden"
              },
              "404": {
                "$ref": "#/components/responses/NotFound"
              },
              "405": {
                "$ref": "#/components/responses/MethodNotAllowed"
              },
              "413": {
                "$ref": "#/components/responses/PayloadTooLarge"
              },
              "429": {
                "$ref": "#/components/responses/TooManyRequests"
              },
              "500": {
                "$ref": "#/components/responses/InternalError"
              },
              "503": {
                "$ref": "#/components/responses/Unavailable"
              }
            }
          }
        },
        "/json/1.3/setLiveActivitySchema": {
          "post": {
            "operationId": "setLiveActivitySchema",
            "tags": [
              "Schemas"
            ],
            "summary": "Publish a Live Activity schema",
            "description": "Server API (E2): a server API token in `request.auth` (checked first) or `Authorization: Token <token>`; `application` is optional. Answers the attributes type and the new version (X2).",
            "security": [
              {
                "serverToken": []
              },
              {}
            ],
            "requestBody": {
              "required": true,
              "description": "`{\"request\": {...}}`; a field sent as `null` counts as absent and unknown fields are ignored.",
              "content": {
                "application/json": {
                  "schema": {
                    "type": "object",
                    "required": [
                      "request"
                    ],
                    "properties": {
                      "request": {
                        "$ref": "#/components/schemas/SetLiveActivitySchemaRequest"
                      }
                    }
                  },
                  "example": {
                    "request": {
                      "auth": "SECRET_API_TOKEN",
                      "attributes_type": "FoodDeliveryAttributes",
                      "content_state": {
                        "status": "string",
                        "estimatedTime": "string",
                        "emoji": "string?"
                      },
                      "attributes": {}
                    }
                  }
                }
              }
            },
            "responses": {
              "200": {
                "description": "Success.",
                "content": {
                  "application/json": {
                    "schema": {
                      "allOf": [
                        {
                          "$ref": "#/components/schemas/Envelope"
                        }
                      ],
                      "properties": {
                        "status_code": {
                          "const": 200
                        },
                        "status_message": {
                          "const": "OK"
                        },
                        "response": {
                          "$ref": "#/components/schemas/SetLiveActivitySchemaResponse"
                        }
                      }
                    }
                  }
                }
              },
              "400": {
                "$ref": "#/components/responses/BadRequest"
              },
              "401": {
                "$ref": "#/components/responses/Unauthorized"
              },
              "403": {
                "$ref": "#/components/responses/Forbidden"
              },
              "404": {
                "$ref": "#/components/responses/NotFound"
              },
              "405": {
                "$ref": "#/components/responses/MethodNotAllowed"
              },
              "413": {
                "$ref": "#/components/responses/PayloadTooLarge"
              },
              "429": {
                "$ref": "#/components/responses/TooManyRequests"
              },
              "500": {
                "$ref": "#/components/responses/InternalError"
              },
              "503": {
                "$ref": "#/components/responses/Unavailable"
              }
            }
          }
        },
        "/json/1.3/getLiveActivitySchemas": {
          "post": {
            "operationId": "getLiveActivitySchemas",
            "tags": [
              "Schemas"
            ],
            "summary": "List Live Activity schemas",
            "description": "Server API (E2): a server API token in `request.auth` (checked first) or `Authorization: Token <token>`; `application` is optional. Answers the schemas (X2).",
            "security": [
              {
                "serverToken": []
              },
              {}
            ],
            "requestBody": {
              "required": true,
              "description": "`{\"request\": {...}}`; a field sent as `null` counts as absent and unknown fields are ignored.",
              "content": {
                "application/json": {
                  "schema": {
                    "type": "object",
                    "required": [
                      "request"
                    ],
                    "properties": {
                      "request": {
                        "$ref": "#/components/schemas/GetLiveActivitySchemasRequest"
                      }
                    }
                  },
                  "example": {
                    "request": {
                      "auth": "SECRET_API_TOKEN",
                      "attributes_type": "FoodDeliveryAttributes"
                    }
                  }
                }
              }
            },
            "responses": {
              "200": {
                "description": "Success.",
                "content": {
                  "application/json": {
                    "schema": {
                      "allOf": [
                        {
                          "$ref": "#/components/schemas/Envelope"
                        }
                      ],
                      "properties": {
                        "status_code": {
                          "const": 200
                        },
                        "status_message": {
                          "const": "OK"
                        },
                        "response": {
                          "$ref": "#/components/schemas/LiveActivitySchemasResponse"
                        }
                      }
                    }
                  }
                }
              },
              "400": {
                "$ref": "#/components/responses/BadRequest"
              },
              "401": {
                "$ref": "#/components/responses/Unauthorized"
              },
              "403": {
                "$ref": "#/components/responses/Forbidden"
              },
              "404": {
                "$ref": "#/components/responses/NotFound"
              },
              "405": {
                "$ref": "#/components/responses/MethodNotAllowed"
              },
              "413": {
                "$ref": "#/components/responses/PayloadTooLarge"
              },
              "429": {
                "$ref": "#/components/responses/TooManyRequests"
              },
              "500": {
                "$ref": "#/components/responses/InternalError"
              },
              "503": {
                "$ref": "#/components/responses/Unavailable"
              }
            }
          }
        },
        "/json/1.3/deleteLiveActivitySchema": {
          "post": {
            "operationId": "deleteLiveActivitySchema",
            "tags": [
              "Schemas"
            ],
            "summary": "Delete a Live Activity schema",
            "description": "Server API (E2): a server API token in `request.auth` (checked first) or `Authorization: Token <token>`; `application` is optional. Answers `{}`; an unknown type is a 400 (X2).",
            "security": [
              {
                "serverToken": []
              },
              {}
            ],
            "requestBody": {
              "required": true,
              "description": "`{\"request\": {...}}`; a field sent as `null` counts as absent and unknown fields are ignored.",
              "content": {
                "application/json": {
                  "schema": {
                    "type": "object",
                    "required": [
                      "request"
                    ],
                    "properties": {
                      "request": {
                        "$ref": "#/components/schemas/DeleteLiveActivitySchemaRequest"
                      }
                    }
                  },
                  "example": {
                    "request": {
                      "auth": "SECRET_API_TOKEN",
                      "attributes_type": "FoodDeliveryAttributes"
                    }
                  }
                }
              }
            },
            "responses": {
              "200": {
                "description": "Success.",
                "content": {
                  "application/json": {
                    "schema": {
                      "allOf": [
                        {
                          "$ref": "#/components/schemas/Envelope"
                        }
                      ],
                      "properties": {
                        "status_code": {
                          "const": 200
                        },
                        "status_message": {
                          "const": "OK"
                        },
                        "response": {
                          "$ref": "#/components/schemas/EmptyResponse"
                        }
                      }
                    }
                  }
                }
              },
              "400": {
                "$ref": "#/components/responses/BadRequest"
              },
              "401": {
                "$ref": "#/components/responses/Unauthorized"
              },
              "403": {
                "$ref": "#/components/responses/Forbidden"
              },
              "404": {
                "$ref": "#/components/responses/NotFound"
              },
              "405": {
                "$ref": "#/components/responses/MethodNotAllowed"
              },
              "413": {
                "$ref": "#/components/responses/PayloadTooLarge"
              },
              "429": {
                "$ref": "#/components/responses/TooManyRequests"
              },
              "500": {
                "$ref": "#/components/responses/InternalError"
              },
              "503": {
                "$ref": "#/components/responses/Unavailable"
              }
            }
          }
        },
        "/healthz": {
          "get": {
            "operationId": "healthz",
            "tags": [
              "Operations"
            ],
            "summary": "Health check",
            "description": "Checks the database. `HEAD` is answered too; other HTTP methods get 405 with `Allow: GET, HEAD`.",
            "security": [],
            "responses": {
              "200": {
                "description": "The database answers.",
                "content": {
                  "application/json": {
                    "schema": {
                      "allOf": [
                        {
                          "$ref": "#/components/schemas/Health"
                        }
                      ],
                      "properties": {
                        "status": {
                          "const": "ok"
                        }
                      }
                    },
                    "example": {
                      "status": "ok"
                    }
                  }
                }
              },
              "503": {
                "description": "The database could not be used.",
                "content": {
                  "application/json": {
                    "schema": {
                      "allOf": [
                        {
                          "$ref": "#/components/schemas/Health"
                        }
                      ],
                      "required": [
                        "reason"
                      ],
                      "properties": {
                        "status": {
                          "const": "unavailable"
                        }
                      }
                    },
                    "example": {
                      "status": "unavailable",
                      "reason": "database"
                    }
                  }
                }
              }
            }
          }
        },
        "/metrics": {
          "get": {
            "operationId": "metrics",
            "tags": [
              "Operations"
            ],
            "summary": "Prometheus metrics",
            "description": "Prometheus text format 0.0.4 (`Content-Type: text/plain; version=0.0.4; charset=utf-8`): `islet_http_requests_total{route, status}`, `islet_http_request_duration_seconds{route}`, and the delivery and APNs families. Other HTTP methods get 405 with `Allow: GET`.",
            "security": [],
            "responses": {
              "200": {
                "description": "The metrics.",
                "content": {
                  "text/plain": {
                    "schema": {
                      "type": "string"
                    }
                  }
                }
              }
            }
          }
        },
        "/openapi.json": {
          "get": {
            "operationId": "openapi",
            "tags": [
              "Operations"
            ],
            "summary": "This document",
            "description": "The OpenAPI 3.1 description of every route Islet serves.",
            "security": [],
            "responses": {
              "200": {
                "description": "The OpenAPI document.",
                "content": {
                  "application/json": {
                    "schema": {
                      "type": "object"
                    }
                  }
                }
              }
            }
          }
        },
        "/simulator/devices": {
          "get": {
            "operationId": "listSimulatedDevices",
            "tags": [
              "Simulator"
            ],
            "summary": "List simulated iPhones",
            "description": "Present only when the server runs with `--apns simulator` (the default of `islet serve`); otherwise 404. Needs a server API token in `Authorization: Token <server API token>` and sees only the simulated iPhones of that token's application. Errors use the envelope; a wrong HTTP method answers 405 with an `Allow` header. Answers every simulated iPhone of the application, without logs.",
            "security": [
              {
                "serverToken": []
              }
            ],
            "responses": {
              "200": {
                "description": "The simulated iPhones.",
                "content": {
                  "application/json": {
                    "schema": {
                      "type": "object",
                      "required": [
                        "devices"
                      ],
                      "properties": {
                        "devices": {
                          "type": "array",
                          "items": {
                            "$ref": "#/components/schemas/SimulatedDevice"
                          }
                        }
                      }
                    }
                  }
                }
              },
              "401": {
                "$ref": "#/components/responses/SimulatorUnauthorized"
              },
              "404": {
                "$ref": "#/components/responses/SimulatorNotFound"
              },
              "405": {
                "$ref": "#/components/responses/SimulatorMethodNotAllowed"
              },
              "500": {
                "$ref": "#/components/responses/InternalError"
              }
            }
          },
          "post": {
            "operationId": "addSimulatedDevice",
            "tags": [
              "Simulator"
            ],
            "summary": "Add a simulated iPhone",
            "description": "Present only when the server runs with `--apns simulator` (the default of `islet serve`); otherwise 404. Needs a server API token in `Authorization: Token <server API token>` and sees only the simulated iPhones of that token's application. Errors use the envelope; a wrong HTTP method answers 405 with an `Allow` header. Adds a simulated iPhone and registers it with Islet as the SDK would (registerDevice with language `en` and timezone `0`, plus push-to-start tokens when its iOS is 17.2 or later). Answers the device, without log.",
            "security": [
              {
                "serverToken": []
              }
            ],
            "requestBody": {
              "required": true,
              "content": {
                "application/json": {
                  "schema": {
                    "$ref": "#/components/schemas/AddSimulatedDeviceRequest"
                  },
                  "example": {
                    "application": "XXXXX-XXXXX",
                    "hwid": "old_phone",
                    "ios_version": "16.4"
                  }
                }
              }
            },
            "responses": {
              "200": {
                "description": "The device.",
                "content": {
                  "application/json": {
                    "schema": {
                      "$ref": "#/components/schemas/SimulatedDevice"
                    }
                  }
                }
              },
              "400": {
                "$ref": "#/components/responses/BadRequest"
              },
              "401": {
                "$ref": "#/components/responses/SimulatorUnauthorized"
              },
              "404": {
                "$ref": "#/components/responses/SimulatorNotFound"
              },
              "405": {
                "$ref": "#/components/responses/SimulatorMethodNotAllowed"
              },
              "413": {
                "$ref": "#/components/responses/PayloadTooLarge"
              },
              "500": {
                "$ref": "#/components/responses/InternalError"
              }
            }
          }
        },
        "/simulator/devices/{hwid}": {
          "get": {
            "operationId": "getSimulatedDevice",
            "tags": [
              "Simulator"
            ],
            "summary": "One simulated iPhone, with its log",
            "description": "Present only when the server runs with `--apns simulator` (the default of `islet serve`); otherwise 404. Needs a server API token in `Authorization: Token <server API token>` and sees only the simulated iPhones of that token's application. Errors use the envelope; a wrong HTTP method answers 405 with an `Allow` header. Answers one device of the application with every push it received.",
            "security": [
              {
                "serverToken": []
              }
            ],
            "parameters": [
              {
                "name": "hwid",
                "in": "path",
                "required": true,
                "description": "The HWID, percent-encoded.",
                "schema": {
                  "type": "string",
                  "minLength": 1
                }
              }
            ],
            "responses": {
              "200": {
                "description": "The device with its log.",
                "content": {
                  "application/json": {
                    "schema": {
                      "allOf": [
                        {
                          "$ref": "#/components/schemas/SimulatedDevice"
                        }
                      ],
                      "required": [
                        "log"
                      ]
                    }
                  }
                }
              },
              "401": {
                "$ref": "#/components/responses/SimulatorUnauthorized"
              },
              "404": {
                "$ref": "#/components/responses/SimulatorNotFound"
              },
              "405": {
                "$ref": "#/components/responses/SimulatorMethodNotAllowed"
              },
              "500": {
                "$ref": "#/components/responses/InternalError"
              }
            }
          }
        }
      },
      "components": {
        "securitySchemes": {
          "serverToken": {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "A server API token, sent as `Authorization: Token <token>` (or `Bearer <token>`). On JSON API methods the token may instead be given in the body as `request.auth`, which is checked first on server methods; that alternative is not a security scheme, hence the `{}` alternative in those operations' security. A server API token may call every method of its application. The simulator routes take it in the header only."
          },
          "deviceToken": {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "The application's device API token (what the SDK ships with), sent as `Authorization: Token <token>` (or `Bearer <token>`); `request.auth` is used when the header is missing. It can only call device methods."
          }
        },
        "schemas": {
          "ApplicationCode": {
            "type": "string",
            "pattern": "^[A-Z0-9]{5}-[A-Z0-9]{5}$",
            "description": "An application code: two groups of five uppercase letters or digits joined by `-` (E2).",
            "examples": [
              "XXXXX-XXXXX"
            ]
          },
          "MessageCode": {
            "type": "string",
            "pattern": "^[A-Z0-9]{5}-[A-Z0-9]{8}-[A-Z0-9]{8}$",
            "description": "A message code, as answered by startLiveActivity/updateLiveActivity (E5).",
            "examples": [
              "Q3J7B-0D8XK2LM-7TPA94ZC"
            ]
          },
          "HexToken": {
            "type": "string",
            "pattern": "^(?:[0-9A-Fa-f]{2}){8,200}$",
            "description": "An APNs token: hexadecimal, an even number of 16 to 400 characters, upper- or lowercase (stored and sent lowercase)."
          },
          "Hwid": {
            "type": "string",
            "minLength": 1,
            "maxLength": 256,
            "description": "The device's id within its application (HWID): non-empty, at most 256 characters."
          },
          "Timestamp": {
            "type": "string",
            "format": "date-time",
            "description": "ISO 8601 in UTC, whole seconds, e.g. `2026-11-29T16:45:39Z`."
          },
          "Int64": {
            "type": "integer",
            "minimum": -9223372036854775808,
            "maximum": 9223372036854775807
          },
          "Envelope": {
            "type": "object",
            "description": "The envelope of every JSON API answer (E1, E4): `status_code` equals the HTTP status; `response` is an object on success and `null` on failure.",
            "required": [
              "status_code",
              "status_message",
              "response"
            ],
            "properties": {
              "status_code": {
                "type": "integer"
              },
              "status_message": {
                "type": "string"
              },
              "response": {
                "type": [
                  "object",
                  "null"
                ]
              }
            }
          },
          "ErrorEnvelope": {
            "description": "A failure (E4): `status_message` names the field by its path relative to `request` and what is wrong with it, e.g. `notifications[0].live_activity.content-state: must be an object, got string`.",
            "allOf": [
              {
                "$ref": "#/components/schemas/Envelope"
              }
            ],
            "properties": {
              "status_code": {
                "minimum": 400,
                "maximum": 599
              },
              "response": {
                "type": "null"
              }
            }
          },
          "TagValue": {
            "type": [
              "string",
              "integer",
              "array",
              "null"
            ],
            "description": "A string (at most 1,024 characters), an integer (`3.0` counts as `3`), a list of at most 100 strings of at most 1,024 characters each, or `null` to remove the tag. Booleans, objects and decimals are refused, and a tag's type is fixed per application by the first value any device sets (another type is refused).",
            "maxLength": 1024,
            "minimum": -9223372036854775808,
            "maximum": 9223372036854775807,
            "maxItems": 100,
            "items": {
              "type": "string",
              "maxLength": 1024
            }
          },
          "Tags": {
            "type": "object",
            "description": "Custom tags `{name: value}`, at most 100 per call; each named tag is replaced, the others stay (D2). The built-in tags `Language`, `OS Version`, `Timezone` and `User ID` cannot be set here.",
            "maxProperties": 100,
            "propertyNames": {
              "minLength": 1,
              "maxLength": 128,
              "not": {
                "enum": [
                  "Language",
                  "OS Version",
                  "Timezone",
                  "User ID"
                ]
              }
            },
            "additionalProperties": {
              "$ref": "#/components/schemas/TagValue"
            }
          },
          "RegisterDeviceRequest": {
            "type": "object",
            "description": "Creates the device (application, hwid) or updates it (D1). The SDK's other fields (`v`, `sounds`, ...) are accepted and ignored. A push token another HWID of the application holds moves to this HWID.",
            "required": [
              "application",
              "hwid",
              "push_token"
            ],
            "properties": {
              "application": {
                "allOf": [
                  {
                    "$ref": "#/components/schemas/ApplicationCode"
                  }
                ],
                "description": "Required on device methods (E3)."
              },
              "auth": {
                "description": "The token, used only when the `Authorization` header is missing (E3); it must then be a string. The device API token or a server API token of the application."
              },
              "hwid": {
                "$ref": "#/components/schemas/Hwid"
              },
              "push_token": {
                "allOf": [
                  {
                    "$ref": "#/components/schemas/HexToken"
                  }
                ],
                "description": "The regular APNs device token."
              },
              "device_type": {
                "type": [
                  "integer",
                  "string",
                  "null"
                ],
                "enum": [
                  1,
                  "1",
                  null
                ],
                "description": "Must be 1 (iOS) when present, as a number or a string."
              },
              "gateway": {
                "type": [
                  "string",
                  "null"
                ],
                "enum": [
                  "production",
                  "sandbox",
                  null
                ],
                "default": "production",
                "description": "Which APNs host this device's pushes go to (A1)."
              },
              "language": {
                "type": [
                  "string",
                  "number",
                  "null"
                ],
                "maxLength": 256,
                "description": "Becomes the built-in tag `Language`; a number is stored as text, an empty string counts as absent."
              },
              "timezone": {
                "type": [
                  "string",
                  "number",
                  "null"
                ],
                "maxLength": 256,
                "description": "Becomes the built-in tag `Timezone` (the SDK sends an offset, often as a number)."
              },
              "os_version": {
                "type": [
                  "string",
                  "number",
                  "null"
                ],
                "maxLength": 256,
                "description": "Becomes the built-in tag `OS Version`; used by S7."
              },
              "userId": {
                "type": [
                  "string",
                  "number",
                  "null"
                ],
                "maxLength": 256,
                "description": "Becomes the built-in tag `User ID`; used by `users` targeting (S4)."
              },
              "tags": {
                "anyOf": [
                  {
                    "$ref": "#/components/schemas/Tags"
                  },
                  {
                    "type": "null"
                  }
                ]
              }
            }
          },
          "UnregisterDeviceRequest": {
            "type": "object",
            "description": "The device loses its push token, push-to-start tokens and update tokens (D2). Idempotent: an unknown HWID is not an error.",
            "required": [
              "application",
              "hwid"
            ],
            "properties": {
              "application": {
                "allOf": [
                  {
                    "$ref": "#/components/schemas/ApplicationCode"
                  }
                ],
                "description": "Required on device methods (E3)."
              },
              "auth": {
                "description": "The token, used only when the `Authorization` header is missing (E3); it must then be a string. The device API token or a server API token of the application."
              },
              "hwid": {
                "$ref": "#/components/schemas/Hwid"
              }
            }
          },
          "SetTagsRequest": {
            "type": "object",
            "description": "Merges tags into a registered device's tags (D2).",
            "required": [
              "application",
              "hwid",
              "tags"
            ],
            "properties": {
              "application": {
                "allOf": [
                  {
                    "$ref": "#/components/schemas/ApplicationCode"
                  }
                ],
                "description": "Required on device methods (E3)."
              },
              "auth": {
                "description": "The token, used only when the `Authorization` header is missing (E3); it must then be a string. The device API token or a server API token of the application."
              },
              "hwid": {
                "$ref": "#/components/schemas/Hwid"
              },
              "tags": {
                "$ref": "#/components/schemas/Tags"
              }
            }
          },
          "GetTagsRequest": {
            "type": "object",
            "description": "A registered device's tags (D2).",
            "required": [
              "application",
              "hwid"
            ],
            "properties": {
              "application": {
                "allOf": [
                  {
                    "$ref": "#/components/schemas/ApplicationCode"
                  }
                ],
                "description": "Required on device methods (E3)."
              },
              "auth": {
                "description": "The token, used only when the `Authorization` header is missing (E3); it must then be a string. The device API token or a server API token of the application."
              },
              "hwid": {
                "$ref": "#/components/schemas/Hwid"
              }
            }
          },
          "SetActivityPushToStartTokenRequest": {
            "type": "object",
            "description": "Stores the token with which Islet can start Live Activities on a registered device (D3).",
            "required": [
              "application",
              "hwid",
              "activity_push_to_start_token"
            ],
            "properties": {
              "application": {
                "allOf": [
                  {
                    "$ref": "#/components/schemas/ApplicationCode"
                  }
                ],
                "description": "Required on device methods (E3)."
              },
              "auth": {
                "description": "The token, used only when the `Authorization` header is missing (E3); it must then be a string. The device API token or a server API token of the application."
              },
              "hwid": {
                "$ref": "#/components/schemas/Hwid"
              },
              "activity_push_to_start_token": {
                "type": "string",
                "pattern": "^(?:(?:[0-9A-Fa-f]{2}){8,200})?$",
                "description": "A hex token; `\"\"` deletes the token stored for this `attributes_type`."
              },
              "attributes_type": {
                "type": [
                  "string",
                  "null"
                ],
                "maxLength": 256,
                "default": "",
                "description": "With a type, the token serves starts of that attributes type only; without, every type."
              }
            }
          },
          "SetActivityTokenRequest": {
            "type": "object",
            "description": "Reports a registered device's update token for one activity, or that activities ended on it (D4). `activity_id` is required with a non-empty `activity_token`.",
            "required": [
              "application",
              "hwid"
            ],
            "properties": {
              "application": {
                "allOf": [
                  {
                    "$ref": "#/components/schemas/ApplicationCode"
                  }
                ],
                "description": "Required on device methods (E3)."
              },
              "auth": {
                "description": "The token, used only when the `Authorization` header is missing (E3); it must then be a string. The device API token or a server API token of the application."
              },
              "hwid": {
                "$ref": "#/components/schemas/Hwid"
              },
              "activity_id": {
                "type": [
                  "string",
                  "null"
                ],
                "maxLength": 256,
                "default": "",
                "description": "The `live_activity_id`; `\"\"` with an empty token: every activity on this device ended."
              },
              "activity_token": {
                "type": [
                  "string",
                  "null"
                ],
                "pattern": "^(?:(?:[0-9A-Fa-f]{2}){8,200})?$",
                "default": "",
                "description": "The activity's update token; `\"\"` (or absent): the activity ended on this device."
              }
            },
            "if": {
              "required": [
                "activity_token"
              ],
              "properties": {
                "activity_token": {
                  "type": "string",
                  "minLength": 1
                }
              }
            },
            "then": {
              "required": [
                "activity_id"
              ],
              "properties": {
                "activity_id": {
                  "type": "string",
                  "minLength": 1
                }
              }
            }
          },
          "SkippedTag": {
            "type": "object",
            "required": [
              "tag",
              "reason"
            ],
            "properties": {
              "tag": {
                "type": "string"
              },
              "reason": {
                "type": "string"
              }
            }
          },
          "DeviceWriteResponse": {
            "type": "object",
            "description": "`{}`, or the tags that were not applied and warnings about the call.",
            "properties": {
              "warnings": {
                "type": "array",
                "items": {
                  "type": "string"
                }
              },
              "skipped_tags": {
                "type": "array",
                "items": {
                  "$ref": "#/components/schemas/SkippedTag"
                }
              }
            }
          },
          "EmptyResponse": {
            "type": "object",
            "description": "`{}`: nothing to report."
          },
          "GetTagsResponse": {
            "type": "object",
            "required": [
              "result"
            ],
            "properties": {
              "result": {
                "type": "object",
                "description": "The built-in tags that have a value first (as strings), then the custom tags by name.",
                "additionalProperties": {
                  "type": [
                    "string",
                    "integer",
                    "array"
                  ],
                  "items": {
                    "type": "string"
                  }
                }
              }
            }
          },
          "GetApplicationRequest": {
            "type": "object",
            "description": "The calling application's public facts.",
            "properties": {
              "application": {
                "type": [
                  "string",
                  "null"
                ],
                "pattern": "^[A-Z0-9]{5}-[A-Z0-9]{5}$",
                "description": "Optional on server methods: the token decides the application. When given it must be well formed (else 400) and the token must belong to it (else 401)."
              },
              "auth": {
                "type": [
                  "string",
                  "null"
                ],
                "minLength": 1,
                "description": "The server API token; checked first, the `Authorization: Token <token>` header is used when `auth` is absent or null (E2)."
              }
            }
          },
          "GetApplicationResponse": {
            "type": "object",
            "required": [
              "application"
            ],
            "properties": {
              "application": {
                "type": "object",
                "required": [
                  "code",
                  "name",
                  "bundle_id",
                  "created_at",
                  "apns"
                ],
                "properties": {
                  "code": {
                    "$ref": "#/components/schemas/ApplicationCode"
                  },
                  "name": {
                    "type": "string"
                  },
                  "bundle_id": {
                    "type": "string"
                  },
                  "created_at": {
                    "$ref": "#/components/schemas/Timestamp"
                  },
                  "apns": {
                    "type": [
                      "object",
                      "null"
                    ],
                    "description": "The APNs signing key pushes are signed with; `null` when the application has no key and the server sends to Apple.",
                    "required": [
                      "team_id",
                      "key_id",
                      "environment"
                    ],
                    "properties": {
                      "team_id": {
                        "type": "string"
                      },
                      "key_id": {
                        "type": "string"
                      },
                      "environment": {
                        "type": "string",
                        "enum": [
                          "production",
                          "sandbox",
                          "both"
                        ]
                      },
                      "mode": {
                        "type": "string",
                        "enum": [
                          "apple",
                          "simulator"
                        ],
                        "description": "Where this server sends pushes."
                      }
                    }
                  }
                }
              }
            }
          },
          "StartNotification": {
            "type": "object",
            "description": "One start (S1–S7). Give exactly one target: `filter` (or `filter_code`), `devices` or `users`; at least one of `title` and `content` must be a non-empty string. The start push's payload must fit in 4,096 bytes (A4). A published schema for the attributes type checks `content-state` and `attributes` (X2).",
            "required": [
              "live_activity",
              "live_activity_id"
            ],
            "properties": {
              "live_activity": {
                "type": "object",
                "required": [
                  "content-state",
                  "attributes-type",
                  "attributes"
                ],
                "properties": {
                  "event": {
                    "type": [
                      "string",
                      "null"
                    ],
                    "enum": [
                      "start",
                      null
                    ]
                  },
                  "content-state": {
                    "type": "object",
                    "description": "The initial ContentState."
                  },
                  "attributes-type": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The app's ActivityAttributes type name."
                  },
                  "attributes": {
                    "type": "object",
                    "description": "The static attributes.",
                    "properties": {
                      "pushwoosh": {
                        "type": [
                          "object",
                          "null"
                        ],
                        "description": "Islet sets `activityId` to `live_activity_id` unless given (A4)."
                      }
                    }
                  },
                  "title": {
                    "type": [
                      "string",
                      "null"
                    ],
                    "description": "The activity's name; not sent."
                  }
                }
              },
              "live_activity_id": {
                "type": "string",
                "minLength": 1,
                "maxLength": 256,
                "description": "Not scheduled or active in this application, nor started twice by one request (S3)."
              },
              "title": {
                "type": [
                  "string",
                  "null"
                ],
                "description": "Alert title of the start push (S2)."
              },
              "content": {
                "type": [
                  "string",
                  "null"
                ],
                "description": "Alert body of the start push (S2)."
              },
              "filter": {
                "type": [
                  "string",
                  "null"
                ],
                "minLength": 1,
                "description": "Name of a filter of this application."
              },
              "filter_code": {
                "type": [
                  "string",
                  "null"
                ],
                "minLength": 1,
                "description": "Older name for `filter`."
              },
              "devices": {
                "type": [
                  "array",
                  "null"
                ],
                "minItems": 1,
                "maxItems": 10000,
                "items": {
                  "type": "string",
                  "minLength": 1
                },
                "description": "HWIDs or push tokens."
              },
              "users": {
                "type": [
                  "array",
                  "null"
                ],
                "minItems": 1,
                "maxItems": 10000,
                "items": {
                  "type": "string",
                  "minLength": 1
                },
                "description": "`userId`s of registerDevice."
              },
              "send_date": {
                "type": [
                  "string",
                  "null"
                ],
                "default": "now",
                "pattern": "^(?:now|[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2})$",
                "description": "`now` or a local `YYYY-MM-DD HH:mm` in `timezone`, from 1 day ago to 30 days ahead (S5)."
              },
              "timezone": {
                "type": [
                  "string",
                  "null"
                ],
                "default": "UTC",
                "description": "An IANA time zone name for `send_date`; unknown zones are refused (S5)."
              },
              "apns_priority": {
                "description": "`10` (the JSON integer) sends `apns-priority: 10`; any other value, of any type, or none sends 5. Never an error (S6, U5)."
              }
            },
            "allOf": [
              {
                "anyOf": [
                  {
                    "required": [
                      "title"
                    ],
                    "properties": {
                      "title": {
                        "type": "string",
                        "minLength": 1
                      }
                    }
                  },
                  {
                    "required": [
                      "content"
                    ],
                    "properties": {
                      "content": {
                        "type": "string",
                        "minLength": 1
                      }
                    }
                  }
                ]
              },
              {
                "oneOf": [
                  {
                    "required": [
                      "filter"
                    ],
                    "properties": {
                      "filter": {
                        "type": "string"
                      }
                    }
                  },
                  {
                    "required": [
                      "filter_code"
                    ],
                    "properties": {
                      "filter_code": {
                        "type": "string"
                      }
                    }
                  },
                  {
                    "required": [
                      "devices"
                    ],
                    "properties": {
                      "devices": {
                        "type": "array"
                      }
                    }
                  },
                  {
                    "required": [
                      "users"
                    ],
                    "properties": {
                      "users": {
                        "type": "array"
                      }
                    }
                  }
                ]
              }
            ]
          },
          "UpdateNotification": {
            "type": "object",
            "description": "One update or end of a started activity (U1–U6), sent at once to the activity's devices. Targeting and scheduling fields are not read. If any of `title`, `subtitle`, `content` is a non-empty string the push alerts, else it is silent.",
            "required": [
              "live_activity_id",
              "live_activity"
            ],
            "properties": {
              "live_activity_id": {
                "type": "string",
                "minLength": 1,
                "maxLength": 256,
                "description": "An active activity of this application (U1)."
              },
              "live_activity": {
                "type": "object",
                "required": [
                  "event",
                  "content-state"
                ],
                "properties": {
                  "event": {
                    "type": "string",
                    "enum": [
                      "update",
                      "end"
                    ]
                  },
                  "content-state": {
                    "type": "object",
                    "description": "The new ContentState."
                  },
                  "dismissal-date": {
                    "type": [
                      "integer",
                      "null"
                    ],
                    "minimum": -9223372036854775808,
                    "maximum": 9223372036854775807,
                    "description": "Unix seconds (U3)."
                  },
                  "relevance-score": {
                    "type": [
                      "integer",
                      "null"
                    ],
                    "minimum": 1,
                    "maximum": 9223372036854775807,
                    "description": "U4."
                  },
                  "stale-date": {
                    "type": [
                      "integer",
                      "null"
                    ],
                    "minimum": -9223372036854775808,
                    "maximum": 9223372036854775807,
                    "description": "Unix seconds (U4)."
                  },
                  "title": {
                    "description": "Alert title when the notification has no `title` (U6): then it must be a string or null; it is not read when `title` is given."
                  }
                }
              },
              "title": {
                "type": [
                  "string",
                  "null"
                ],
                "description": "Alert title (U6)."
              },
              "subtitle": {
                "type": [
                  "string",
                  "null"
                ],
                "description": "Alert subtitle (U6)."
              },
              "content": {
                "type": [
                  "string",
                  "null"
                ],
                "description": "Alert body (U6)."
              },
              "ios_sound": {
                "type": [
                  "string",
                  "null"
                ],
                "description": "`aps.alert.sound`, only when the update alerts."
              },
              "apns_priority": {
                "description": "`10` (the JSON integer) sends `apns-priority: 10`; any other value, of any type, or none sends 5. Never an error (S6, U5)."
              }
            },
            "if": {
              "properties": {
                "title": {
                  "type": "null"
                }
              }
            },
            "then": {
              "properties": {
                "live_activity": {
                  "properties": {
                    "title": {
                      "type": [
                        "string",
                        "null"
                      ]
                    }
                  }
                }
              }
            }
          },
          "StartLiveActivityRequest": {
            "type": "object",
            "description": "Starts Live Activities (S1–S8). One bad notification rejects the whole request; nothing is stored or sent.",
            "properties": {
              "application": {
                "type": [
                  "string",
                  "null"
                ],
                "pattern": "^[A-Z0-9]{5}-[A-Z0-9]{5}$",
                "description": "Optional on server methods: the token decides the application. When given it must be well formed (else 400) and the token must belong to it (else 401)."
              },
              "auth": {
                "type": [
                  "string",
                  "null"
                ],
                "minLength": 1,
                "description": "The server API token; checked first, the `Authorization: Token <token>` header is used when `auth` is absent or null (E2)."
              },
              "notifications": {
                "type": "array",
                "minItems": 1,
                "maxItems": 100,
                "items": {
                  "$ref": "#/components/schemas/StartNotification"
                }
              },
              "dry_run": {
                "type": [
                  "boolean",
                  "null"
                ],
                "default": false,
                "description": "Validate and show the pushes without storing or sending anything (X3)."
              }
            },
            "required": [
              "notifications"
            ]
          },
          "UpdateLiveActivityRequest": {
            "type": "object",
            "description": "Updates or ends running activities (U1–U6). One bad notification rejects the whole request.",
            "properties": {
              "application": {
                "type": [
                  "string",
                  "null"
                ],
                "pattern": "^[A-Z0-9]{5}-[A-Z0-9]{5}$",
                "description": "Optional on server methods: the token decides the application. When given it must be well formed (else 400) and the token must belong to it (else 401)."
              },
              "auth": {
                "type": [
                  "string",
                  "null"
                ],
                "minLength": 1,
                "description": "The server API token; checked first, the `Authorization: Token <token>` header is used when `auth` is absent or null (E2)."
              },
              "notifications": {
                "type": "array",
                "minItems": 1,
                "maxItems": 100,
                "items": {
                  "$ref": "#/components/schemas/UpdateNotification"
                }
              },
              "dry_run": {
                "type": [
                  "boolean",
                  "null"
                ],
                "default": false,
                "description": "Validate and show the pushes without storing or sending anything (X3)."
              }
            },
            "required": [
              "notifications"
            ]
          },
          "DryRunSkip": {
            "type": "object",
            "required": [
              "hwid",
              "skipped"
            ],
            "properties": {
              "hwid": {
                "type": "string"
              },
              "skipped": {
                "type": "string",
                "description": "The skip reason."
              }
            }
          },
          "DryRunPush": {
            "type": "object",
            "required": [
              "hwid",
              "gateway",
              "path",
              "headers",
              "payload",
              "bytes"
            ],
            "properties": {
              "hwid": {
                "type": "string"
              },
              "gateway": {
                "type": "string",
                "enum": [
                  "production",
                  "sandbox"
                ]
              },
              "path": {
                "type": "string",
                "description": "`/3/device/<token>`"
              },
              "headers": {
                "type": "object",
                "additionalProperties": {
                  "type": "string"
                },
                "description": "The APNs request headers, without `authorization`."
              },
              "payload": {
                "description": "The exact APNs payload."
              },
              "bytes": {
                "type": "integer",
                "minimum": 0
              }
            }
          },
          "DryRunNotification": {
            "type": "object",
            "required": [
              "live_activity_id",
              "event",
              "send_at",
              "targets",
              "pushes"
            ],
            "properties": {
              "live_activity_id": {
                "type": "string"
              },
              "event": {
                "type": "string",
                "enum": [
                  "start",
                  "update",
                  "end"
                ]
              },
              "send_at": {
                "$ref": "#/components/schemas/Timestamp"
              },
              "targets": {
                "type": "integer",
                "minimum": 0
              },
              "pushes": {
                "type": "array",
                "maxItems": 100,
                "items": {
                  "anyOf": [
                    {
                      "$ref": "#/components/schemas/DryRunPush"
                    },
                    {
                      "$ref": "#/components/schemas/DryRunSkip"
                    }
                  ]
                },
                "description": "The first 100 targets."
              }
            }
          },
          "MessagesResponse": {
            "type": "object",
            "required": [
              "Messages"
            ],
            "description": "One message code per notification, in order (E5); `[]` and `dry_run` on a dry run (X3).",
            "properties": {
              "Messages": {
                "type": "array",
                "items": {
                  "$ref": "#/components/schemas/MessageCode"
                }
              },
              "warnings": {
                "type": "array",
                "items": {
                  "type": "string"
                },
                "description": "Fields a schema does not know (X2)."
              },
              "dry_run": {
                "type": "array",
                "items": {
                  "$ref": "#/components/schemas/DryRunNotification"
                }
              }
            }
          },
          "DeleteMessageRequest": {
            "type": "object",
            "description": "Cancels a start that has not fired yet; its activity ends and the id is free again (S3).",
            "properties": {
              "application": {
                "type": [
                  "string",
                  "null"
                ],
                "pattern": "^[A-Z0-9]{5}-[A-Z0-9]{5}$",
                "description": "Optional on server methods: the token decides the application. When given it must be well formed (else 400) and the token must belong to it (else 401)."
              },
              "auth": {
                "type": [
                  "string",
                  "null"
                ],
                "minLength": 1,
                "description": "The server API token; checked first, the `Authorization: Token <token>` header is used when `auth` is absent or null (E2)."
              },
              "message": {
                "$ref": "#/components/schemas/MessageCode"
              }
            },
            "required": [
              "message"
            ]
          },
          "GetMessageDetailsRequest": {
            "type": "object",
            "description": "A message's status and per-device counts (X4).",
            "properties": {
              "application": {
                "type": [
                  "string",
                  "null"
                ],
                "pattern": "^[A-Z0-9]{5}-[A-Z0-9]{5}$",
                "description": "Optional on server methods: the token decides the application. When given it must be well formed (else 400) and the token must belong to it (else 401)."
              },
              "auth": {
                "type": [
                  "string",
                  "null"
                ],
                "minLength": 1,
                "description": "The server API token; checked first, the `Authorization: Token <token>` header is used when `auth` is absent or null (E2)."
              },
              "message": {
                "$ref": "#/components/schemas/MessageCode"
              }
            },
            "required": [
              "message"
            ]
          },
          "GetLiveActivityRequest": {
            "type": "object",
            "description": "An activity, its last content-state and its devices (X4).",
            "properties": {
              "application": {
                "type": [
                  "string",
                  "null"
                ],
                "pattern": "^[A-Z0-9]{5}-[A-Z0-9]{5}$",
                "description": "Optional on server methods: the token decides the application. When given it must be well formed (else 400) and the token must belong to it (else 401)."
              },
              "auth": {
                "type": [
                  "string",
                  "null"
                ],
                "minLength": 1,
                "description": "The server API token; checked first, the `Authorization: Token <token>` header is used when `auth` is absent or null (E2)."
              },
              "live_activity_id": {
                "type": "string",
                "minLength": 1,
                "maxLength": 256
              },
              "limit": {
                "type": [
                  "integer",
                  "null"
                ],
                "minimum": 1,
                "maximum": 1000,
                "description": "Devices per page (default 1000)."
              },
              "cursor": {
                "type": [
                  "string",
                  "null"
                ],
                "pattern": "^[0-9]+$",
                "description": "The `next_cursor` of the previous page."
              }
            },
            "required": [
              "live_activity_id"
            ]
          },
          "MessageDetailsResponse": {
            "type": "object",
            "required": [
              "message"
            ],
            "properties": {
              "message": {
                "type": "object",
                "required": [
                  "code",
                  "event",
                  "live_activity_id",
                  "status",
                  "created_at",
                  "send_at",
                  "finished_at",
                  "counts",
                  "apns_reasons"
                ],
                "properties": {
                  "code": {
                    "$ref": "#/components/schemas/MessageCode"
                  },
                  "event": {
                    "type": "string",
                    "enum": [
                      "start",
                      "update",
                      "end"
                    ]
                  },
                  "live_activity_id": {
                    "type": "string"
                  },
                  "status": {
                    "type": "string",
                    "enum": [
                      "superseded",
                      "scheduled",
                      "retrying",
                      "pending",
                      "sending",
                      "done",
                      "cancelled"
                    ]
                  },
                  "created_at": {
                    "$ref": "#/components/schemas/Timestamp"
                  },
                  "send_at": {
                    "$ref": "#/components/schemas/Timestamp"
                  },
                  "finished_at": {
                    "type": [
                      "string",
                      "null"
                    ],
                    "format": "date-time"
                  },
                  "counts": {
                    "type": "object",
                    "required": [
                      "targeted",
                      "sent",
                      "failed",
                      "skipped"
                    ],
                    "properties": {
                      "targeted": {
                        "type": "integer",
                        "minimum": 0
                      },
                      "sent": {
                        "type": "integer",
                        "minimum": 0
                      },
                      "failed": {
                        "type": "integer",
                        "minimum": 0
                      },
                      "skipped": {
                        "type": "object",
                        "additionalProperties": {
                          "type": "integer",
                          "minimum": 0
                        },
                        "description": "`{reason: count}` of devices not pushed."
                      },
                      "retrying": {
                        "type": "integer",
                        "minimum": 0
                      },
                      "sending": {
                        "type": "integer",
                        "minimum": 0
                      },
                      "unconfirmed": {
                        "type": "integer",
                        "minimum": 0
                      },
                      "superseded": {
                        "type": "integer",
                        "minimum": 0
                      },
                      "expired": {
                        "type": "integer",
                        "minimum": 0
                      },
                      "caught_up": {
                        "type": "integer",
                        "minimum": 0
                      }
                    }
                  },
                  "next_attempt_at": {
                    "$ref": "#/components/schemas/Timestamp"
                  },
                  "superseded_by": {
                    "$ref": "#/components/schemas/MessageCode"
                  },
                  "expires_at": {
                    "$ref": "#/components/schemas/Timestamp"
                  },
                  "apns_reasons": {
                    "type": "object",
                    "additionalProperties": {
                      "type": "integer",
                      "minimum": 0
                    },
                    "description": "`{reason: count}` of the failed pushes."
                  }
                }
              }
            }
          },
          "LiveActivityResponse": {
            "type": "object",
            "required": [
              "live_activity"
            ],
            "properties": {
              "live_activity": {
                "type": "object",
                "required": [
                  "live_activity_id",
                  "state",
                  "attributes_type",
                  "name",
                  "content_state",
                  "updated_at",
                  "devices",
                  "device_count",
                  "next_cursor"
                ],
                "properties": {
                  "live_activity_id": {
                    "type": "string"
                  },
                  "state": {
                    "type": "string",
                    "enum": [
                      "scheduled",
                      "active",
                      "ended"
                    ]
                  },
                  "attributes_type": {
                    "type": [
                      "string",
                      "null"
                    ]
                  },
                  "name": {
                    "type": [
                      "string",
                      "null"
                    ]
                  },
                  "content_state": {
                    "type": [
                      "object",
                      "null"
                    ]
                  },
                  "updated_at": {
                    "$ref": "#/components/schemas/Timestamp"
                  },
                  "devices": {
                    "type": "array",
                    "maxItems": 1000,
                    "description": "A page of the activity's devices, in order; `next_cursor` continues it.",
                    "items": {
                      "type": "object",
                      "required": [
                        "hwid",
                        "state",
                        "last_status",
                        "last_reason",
                        "last_message",
                        "last_delivery",
                        "caught_up"
                      ],
                      "properties": {
                        "hwid": {
                          "type": "string"
                        },
                        "state": {
                          "type": "string",
                          "description": "`active`, `token-dead` or `ended`."
                        },
                        "last_status": {
                          "type": [
                            "integer",
                            "null"
                          ]
                        },
                        "last_reason": {
                          "type": [
                            "string",
                            "null"
                          ]
                        },
                        "last_message": {
                          "type": [
                            "string",
                            "null"
                          ]
                        },
                        "last_delivery": {
                          "type": [
                            "string",
                            "null"
                          ],
                          "description": "A delivery state: `sent`, `failed`, `skipped`, `retrying`, `sending`, `unconfirmed`, `superseded`, `expired`."
                        },
                        "caught_up": {
                          "type": "boolean"
                        }
                      }
                    }
                  },
                  "device_count": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "How many devices take part in the activity."
                  },
                  "next_cursor": {
                    "type": [
                      "string",
                      "null"
                    ],
                    "description": "The `cursor` of the next page; null on the last page."
                  }
                }
              }
            }
          },
          "FilterCondition": {
            "type": "array",
            "description": "`[tag, operator, value]`. The tag is built-in (`Language`, `OS Version`, `Timezone`, `User ID`) or a custom tag some device has set. `IN`/`NOTIN` take a non-empty array of at most 1,000 values, `BETWEEN` `[min, max]` with min <= max, the others one value. `GTE`, `LTE` and `BETWEEN` compare integer tags and `OS Version` only. Values must fit the tag's type.",
            "minItems": 3,
            "maxItems": 3,
            "prefixItems": [
              {
                "type": "string",
                "minLength": 1
              },
              {
                "type": "string",
                "enum": [
                  "EQ",
                  "NOTEQ",
                  "IN",
                  "NOTIN",
                  "GTE",
                  "LTE",
                  "BETWEEN"
                ]
              },
              {
                "anyOf": [
                  {
                    "type": [
                      "string",
                      "number"
                    ]
                  },
                  {
                    "type": "array",
                    "items": {
                      "type": [
                        "string",
                        "number"
                      ]
                    }
                  }
                ]
              }
            ],
            "allOf": [
              {
                "if": {
                  "prefixItems": [
                    true,
                    {
                      "enum": [
                        "IN",
                        "NOTIN"
                      ]
                    }
                  ]
                },
                "then": {
                  "prefixItems": [
                    true,
                    true,
                    {
                      "type": "array",
                      "minItems": 1,
                      "maxItems": 1000,
                      "items": {
                        "type": [
                          "string",
                          "number"
                        ]
                      }
                    }
                  ]
                }
              },
              {
                "if": {
                  "prefixItems": [
                    true,
                    {
                      "const": "BETWEEN"
                    }
                  ]
                },
                "then": {
                  "prefixItems": [
                    true,
                    true,
                    {
                      "type": "array",
                      "minItems": 2,
                      "maxItems": 2,
                      "items": {
                        "type": [
                          "string",
                          "number"
                        ]
                      }
                    }
                  ]
                }
              },
              {
                "if": {
                  "prefixItems": [
                    true,
                    {
                      "enum": [
                        "EQ",
                        "NOTEQ",
                        "GTE",
                        "LTE"
                      ]
                    }
                  ]
                },
                "then": {
                  "prefixItems": [
                    true,
                    true,
                    {
                      "type": [
                        "string",
                        "number"
                      ]
                    }
                  ]
                }
              },
              {
                "if": {
                  "prefixItems": [
                    {
                      "enum": [
                        "Language",
                        "Timezone",
                        "User ID"
                      ]
                    }
                  ]
                },
                "then": {
                  "prefixItems": [
                    true,
                    {
                      "enum": [
                        "EQ",
                        "NOTEQ",
                        "IN",
                        "NOTIN"
                      ]
                    },
                    {
                      "type": [
                        "string",
                        "array"
                      ],
                      "items": {
                        "type": "string"
                      }
                    }
                  ]
                }
              },
              {
                "if": {
                  "prefixItems": [
                    {
                      "const": "OS Version"
                    }
                  ]
                },
                "then": {
                  "prefixItems": [
                    true,
                    true,
                    {
                      "type": [
                        "string",
                        "number",
                        "array"
                      ],
                      "pattern": "^[0-9]{1,3}(?:[.][0-9]{1,3}){0,2}$",
                      "items": {
                        "type": [
                          "string",
                          "number"
                        ],
                        "pattern": "^[0-9]{1,3}(?:[.][0-9]{1,3}){0,2}$"
                      }
                    }
                  ]
                }
              }
            ],
            "examples": [
              [
                "OS Version",
                "GTE",
                "17.2"
              ],
              [
                "Topics",
                "IN",
                [
                  "football",
                  "tennis"
                ]
              ],
              [
                "Level",
                "BETWEEN",
                [
                  1,
                  5
                ]
              ]
            ]
          },
          "CreateFilterRequest": {
            "type": "object",
            "description": "Creates a named audience over device tags (X1).",
            "properties": {
              "application": {
                "type": [
                  "string",
                  "null"
                ],
                "pattern": "^[A-Z0-9]{5}-[A-Z0-9]{5}$",
                "description": "Optional on server methods: the token decides the application. When given it must be well formed (else 400) and the token must belong to it (else 401)."
              },
              "auth": {
                "type": [
                  "string",
                  "null"
                ],
                "minLength": 1,
                "description": "The server API token; checked first, the `Authorization: Token <token>` header is used when `auth` is absent or null (E2)."
              },
              "name": {
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "description": "Unique in the application."
              },
              "operator": {
                "type": [
                  "string",
                  "null"
                ],
                "pattern": "^(?:[Aa][Nn][Dd]|[Oo][Rr])$",
                "default": "AND",
                "description": "`AND` or `OR`, any case: how conditions combine."
              },
              "conditions": {
                "type": "array",
                "minItems": 1,
                "maxItems": 50,
                "items": {
                  "$ref": "#/components/schemas/FilterCondition"
                }
              }
            },
            "required": [
              "name",
              "conditions"
            ]
          },
          "ListFiltersRequest": {
            "type": "object",
            "description": "The application's filters (X1).",
            "properties": {
              "application": {
                "type": [
                  "string",
                  "null"
                ],
                "pattern": "^[A-Z0-9]{5}-[A-Z0-9]{5}$",
                "description": "Optional on server methods: the token decides the application. When given it must be well formed (else 400) and the token must belong to it (else 401)."
              },
              "auth": {
                "type": [
                  "string",
                  "null"
                ],
                "minLength": 1,
                "description": "The server API token; checked first, the `Authorization: Token <token>` header is used when `auth` is absent or null (E2)."
              }
            }
          },
          "DeleteFilterRequest": {
            "type": "object",
            "description": "Deletes a filter by name (X1).",
            "properties": {
              "application": {
                "type": [
                  "string",
                  "null"
                ],
                "pattern": "^[A-Z0-9]{5}-[A-Z0-9]{5}$",
                "description": "Optional on server methods: the token decides the application. When given it must be well formed (else 400) and the token must belong to it (else 401)."
              },
              "auth": {
                "type": [
                  "string",
                  "null"
                ],
                "minLength": 1,
                "description": "The server API token; checked first, the `Authorization: Token <token>` header is used when `auth` is absent or null (E2)."
              },
              "name": {
                "type": "string",
                "minLength": 1,
                "maxLength": 200
              }
            },
            "required": [
              "name"
            ]
          },
          "Filter": {
            "type": "object",
            "required": [
              "name",
              "operator",
              "conditions"
            ],
            "properties": {
              "name": {
                "type": "string"
              },
              "operator": {
                "type": "string",
                "enum": [
                  "AND",
                  "OR"
                ]
              },
              "conditions": {
                "type": "array",
                "items": {
                  "type": "array",
                  "minItems": 3,
                  "maxItems": 3,
                  "prefixItems": [
                    {
                      "type": "string"
                    },
                    {
                      "type": "string",
                      "enum": [
                        "EQ",
                        "NOTEQ",
                        "IN",
                        "NOTIN",
                        "GTE",
                        "LTE",
                        "BETWEEN"
                      ]
                    },
                    true
                  ]
                }
              }
            }
          },
          "FilterResponse": {
            "type": "object",
            "required": [
              "filter"
            ],
            "properties": {
              "filter": {
                "$ref": "#/components/schemas/Filter"
              }
            }
          },
          "FiltersResponse": {
            "type": "object",
            "required": [
              "filters"
            ],
            "properties": {
              "filters": {
                "type": "array",
                "items": {
                  "$ref": "#/components/schemas/Filter"
                }
              }
            }
          },
          "SchemaFields": {
            "type": "object",
            "description": "`{field: type}` of a Codable struct.",
            "propertyNames": {
              "minLength": 1
            },
            "additionalProperties": {
              "$ref": "#/components/schemas/SchemaFieldType"
            }
          },
          "SchemaFieldType": {
            "description": "A type name (`?` suffix: optional), an object of fields (a nested struct), or `[elementType]` (an array whose elements all have that type).",
            "anyOf": [
              {
                "type": "string",
                "enum": [
                  "string",
                  "number",
                  "integer",
                  "boolean",
                  "date",
                  "object",
                  "array",
                  "string?",
                  "number?",
                  "integer?",
                  "boolean?",
                  "date?",
                  "object?",
                  "array?"
                ]
              },
              {
                "$ref": "#/components/schemas/SchemaFields"
              },
              {
                "type": "array",
                "minItems": 1,
                "maxItems": 1,
                "items": {
                  "$ref": "#/components/schemas/SchemaFieldType"
                }
              }
            ]
          },
          "SetLiveActivitySchemaRequest": {
            "type": "object",
            "description": "Publishes a new version of an attributes type's schema (X2).",
            "properties": {
              "application": {
                "type": [
                  "string",
                  "null"
                ],
                "pattern": "^[A-Z0-9]{5}-[A-Z0-9]{5}$",
                "description": "Optional on server methods: the token decides the application. When given it must be well formed (else 400) and the token must belong to it (else 401)."
              },
              "auth": {
                "type": [
                  "string",
                  "null"
                ],
                "minLength": 1,
                "description": "The server API token; checked first, the `Authorization: Token <token>` header is used when `auth` is absent or null (E2)."
              },
              "attributes_type": {
                "type": "string",
                "minLength": 1,
                "description": "Matches `live_activity.attributes-type`."
              },
              "content_state": {
                "$ref": "#/components/schemas/SchemaFields"
              },
              "attributes": {
                "anyOf": [
                  {
                    "$ref": "#/components/schemas/SchemaFields"
                  },
                  {
                    "type": "null"
                  }
                ],
                "default": {}
              },
              "description": {
                "type": [
                  "string",
                  "null"
                ]
              }
            },
            "required": [
              "attributes_type",
              "content_state"
            ]
          },
          "GetLiveActivitySchemasRequest": {
            "type": "object",
            "description": "Without `attributes_type`, the current version of every type that is not deleted; with it, every version of that type, oldest first (X2).",
            "properties": {
              "application": {
                "type": [
                  "string",
                  "null"
                ],
                "pattern": "^[A-Z0-9]{5}-[A-Z0-9]{5}$",
                "description": "Optional on server methods: the token decides the application. When given it must be well formed (else 400) and the token must belong to it (else 401)."
              },
              "auth": {
                "type": [
                  "string",
                  "null"
                ],
                "minLength": 1,
                "description": "The server API token; checked first, the `Authorization: Token <token>` header is used when `auth` is absent or null (E2)."
              },
              "attributes_type": {
                "type": [
                  "string",
                  "null"
                ]
              }
            }
          },
          "DeleteLiveActivitySchemaRequest": {
            "type": "object",
            "description": "New starts of that type are no longer checked (X2).",
            "properties": {
              "application": {
                "type": [
                  "string",
                  "null"
                ],
                "pattern": "^[A-Z0-9]{5}-[A-Z0-9]{5}$",
                "description": "Optional on server methods: the token decides the application. When given it must be well formed (else 400) and the token must belong to it (else 401)."
              },
              "auth": {
                "type": [
                  "string",
                  "null"
                ],
                "minLength": 1,
                "description": "The server API token; checked first, the `Authorization: Token <token>` header is used when `auth` is absent or null (E2)."
              },
              "attributes_type": {
                "type": "string",
                "minLength": 1
              }
            },
            "required": [
              "attributes_type"
            ]
          },
          "SetLiveActivitySchemaResponse": {
            "type": "object",
            "required": [
              "attributes_type",
              "version"
            ],
            "properties": {
              "attributes_type": {
                "type": "string"
              },
              "version": {
                "type": "integer",
                "minimum": 1
              }
            }
          },
          "StoredSchema": {
            "type": "object",
            "required": [
              "attributes_type",
              "version",
              "content_state",
              "attributes",
              "description",
              "created_at"
            ],
            "properties": {
              "attributes_type": {
                "type": "string"
              },
              "version": {
                "type": "integer"
              },
              "content_state": {
                "type": "object"
              },
              "attributes": {
                "type": "object"
              },
              "description": {
                "type": [
                  "string",
                  "null"
                ]
              },
              "created_at": {
                "$ref": "#/components/schemas/Timestamp"
              }
            }
          },
          "LiveActivitySchemasResponse": {
            "type": "object",
            "required": [
              "schemas"
            ],
            "properties": {
              "schemas": {
                "type": "array",
                "items": {
                  "$ref": "#/components/schemas/StoredSchema"
                }
              }
            }
          },
          "Health": {
            "type": "object",
            "required": [
              "status"
            ],
            "properties": {
              "status": {
                "type": "string",
                "enum": [
                  "ok",
                  "unavailable"
                ]
              },
              "reason": {
                "type": "string"
              }
            }
          },
          "SimulatedDevice": {
            "type": "object",
            "required": [
              "hwid",
              "application",
              "ios_version",
              "locked",
              "push_token",
              "push_to_start_tokens",
              "uninstalled",
              "lock_screen",
              "alerts"
            ],
            "properties": {
              "hwid": {
                "type": "string"
              },
              "application": {
                "type": "string"
              },
              "ios_version": {
                "type": "string"
              },
              "locked": {
                "type": "boolean"
              },
              "uninstalled": {
                "type": "boolean"
              },
              "push_token": {
                "type": "string"
              },
              "push_to_start_tokens": {
                "type": "object",
                "additionalProperties": {
                  "type": "string"
                },
                "description": "`{attributes_type: token}`, `\"\"` for any type."
              },
              "lock_screen": {
                "type": "array",
                "description": "Visible activities, most relevant first.",
                "items": {
                  "type": "object",
                  "required": [
                    "activity_id",
                    "attributes_type",
                    "content_state",
                    "stale",
                    "ended",
                    "relevance_score",
                    "waiting_for_unlock"
                  ],
                  "properties": {
                    "activity_id": {
                      "type": "string"
                    },
                    "attributes_type": {
                      "type": "string"
                    },
                    "content_state": {},
                    "stale": {
                      "type": "boolean"
                    },
                    "ended": {
                      "type": "boolean"
                    },
                    "relevance_score": {
                      "type": [
                        "integer",
                        "null"
                      ]
                    },
                    "waiting_for_unlock": {
                      "type": "boolean"
                    }
                  }
                }
              },
              "alerts": {
                "type": "array",
                "maxItems": 20,
                "items": {
                  "type": "string"
                },
                "description": "The last 20 alerts shown."
              },
              "log": {
                "type": "array",
                "description": "Every push received (single device only).",
                "items": {
                  "type": "object",
                  "required": [
                    "at",
                    "apns_id",
                    "push_type",
                    "event",
                    "priority",
                    "dropped",
                    "payload"
                  ],
                  "properties": {
                    "at": {
                      "$ref": "#/components/schemas/Timestamp"
                    },
                    "apns_id": {
                      "type": "string"
                    },
                    "push_type": {
                      "type": "string"
                    },
                    "event": {
                      "type": [
                        "string",
                        "null"
                      ]
                    },
                    "priority": {
                      "type": "integer"
                    },
                    "dropped": {
                      "type": [
                        "string",
                        "null"
                      ],
                      "description": "Why iOS would have dropped it."
                    },
                    "payload": {
                      "description": "The payload as JSON, or its text when it is not JSON."
                    }
                  }
                }
              }
            }
          },
          "AddSimulatedDeviceRequest": {
            "type": "object",
            "description": "A plain JSON object, not wrapped in `request`. The device is added to the application of the server API token.",
            "required": [
              "hwid"
            ],
            "properties": {
              "application": {
                "type": [
                  "string",
                  "null"
                ],
                "pattern": "^[A-Z0-9]{5}-[A-Z0-9]{5}$",
                "description": "Optional: when given it must be the token's application, else 401."
              },
              "hwid": {
                "$ref": "#/components/schemas/Hwid"
              },
              "ios_version": {
                "type": [
                  "string",
                  "null"
                ],
                "pattern": "^[0-9]{1,3}(?:[.][0-9]{1,3}){0,2}$",
                "default": "17.4",
                "description": "A version such as `17.4`: 1 to 3 dot-separated numbers below 1000."
              },
              "locked": {
                "type": [
                  "boolean",
                  "null"
                ],
                "default": false
              },
              "attributes_types": {
                "type": [
                  "array",
                  "null"
                ],
                "items": {
                  "type": "string"
                },
                "default": [],
                "description": "One push-to-start token per type (iOS 17.2+); none given: one generic token."
              }
            }
          }
        },
        "responses": {
          "BadRequest": {
            "description": "Malformed JSON, a body that is not `{\"request\": {...}}`, a malformed `application`, a field of the wrong type, a value breaking a rule, or a reference to something that does not exist (device, filter, activity, message, schema). Nothing was changed.",
            "content": {
              "application/json": {
                "schema": {
                  "allOf": [
                    {
                      "$ref": "#/components/schemas/ErrorEnvelope"
                    }
                  ],
                  "properties": {
                    "status_code": {
                      "const": 400
                    }
                  }
                }
              }
            }
          },
          "Unauthorized": {
            "description": "The token is missing, wrong, revoked, or of the wrong kind (a device API token on a server method). A wrong token and an unknown application get the same answer.",
            "content": {
              "application/json": {
                "schema": {
                  "allOf": [
                    {
                      "$ref": "#/components/schemas/ErrorEnvelope"
                    }
                  ],
                  "properties": {
                    "status_code": {
                      "const": 401
                    }
                  }
                }
              }
            }
          },
          "Forbidden": {
            "description": "The token is valid but the call is not allowed, e.g. a device reporting a token for an activity it may not join.",
            "content": {
              "application/json": {
                "schema": {
                  "allOf": [
                    {
                      "$ref": "#/components/schemas/ErrorEnvelope"
                    }
                  ],
                  "properties": {
                    "status_code": {
                      "const": 403
                    }
                  }
                }
              }
            }
          },
          "NotFound": {
            "description": "No such JSON API method on this server (`unknown method '<name>'`, with a suggestion when a method name is close) or no such path.",
            "content": {
              "application/json": {
                "schema": {
                  "allOf": [
                    {
                      "$ref": "#/components/schemas/ErrorEnvelope"
                    }
                  ],
                  "properties": {
                    "status_code": {
                      "const": 404
                    }
                  }
                }
              }
            }
          },
          "MethodNotAllowed": {
            "description": "A JSON API method called with anything but `POST`.",
            "content": {
              "application/json": {
                "schema": {
                  "allOf": [
                    {
                      "$ref": "#/components/schemas/ErrorEnvelope"
                    }
                  ],
                  "properties": {
                    "status_code": {
                      "const": 405
                    }
                  }
                }
              }
            },
            "headers": {
              "Allow": {
                "description": "The HTTP methods the path takes (`POST` for JSON API methods).",
                "required": true,
                "schema": {
                  "type": "string"
                }
              }
            }
          },
          "PayloadTooLarge": {
            "description": "The request body is larger than 1 MiB (1,048,576 bytes); refused from its `Content-Length` before it is read.",
            "content": {
              "application/json": {
                "schema": {
                  "allOf": [
                    {
                      "$ref": "#/components/schemas/ErrorEnvelope"
                    }
                  ],
                  "properties": {
                    "status_code": {
                      "const": 413
                    }
                  }
                }
              }
            }
          },
          "TooManyRequests": {
            "description": "Rate limited: retry after the number of seconds in `Retry-After`. Nothing was changed.",
            "content": {
              "application/json": {
                "schema": {
                  "allOf": [
                    {
                      "$ref": "#/components/schemas/ErrorEnvelope"
                    }
                  ],
                  "properties": {
                    "status_code": {
                      "const": 429
                    }
                  }
                }
              }
            },
            "headers": {
              "Retry-After": {
                "description": "Whole seconds to wait before retrying.",
                "required": true,
                "schema": {
                  "type": "string",
                  "pattern": "^[0-9]+$"
                }
              }
            }
          },
          "InternalError": {
            "description": "An unexpected internal failure; nothing was changed.",
            "content": {
              "application/json": {
                "schema": {
                  "allOf": [
                    {
                      "$ref": "#/components/schemas/ErrorEnvelope"
                    }
                  ],
                  "properties": {
                    "status_code": {
                      "const": 500
                    }
                  }
                }
              }
            }
          },
          "Unavailable": {
            "description": "The database could not be used: `storage is unavailable; nothing was changed, retry later`.",
            "content": {
              "application/json": {
                "schema": {
                  "allOf": [
                    {
                      "$ref": "#/components/schemas/ErrorEnvelope"
                    }
                  ],
                  "properties": {
                    "status_code": {
                      "const": 503
                    }
                  }
                }
              }
            }
          },
          "SimulatorUnauthorized": {
            "description": "The `Authorization: Token <server API token>` header is missing, wrong, revoked or a device API token, or the body names another application than the token's.",
            "content": {
              "application/json": {
                "schema": {
                  "allOf": [
                    {
                      "$ref": "#/components/schemas/ErrorEnvelope"
                    }
                  ],
                  "properties": {
                    "status_code": {
                      "const": 401
                    }
                  }
                }
              }
            }
          },
          "SimulatorNotFound": {
            "description": "No such simulated device in the token's application (`no simulated device '<hwid>' in application <code>`), or the server does not run the simulator (`--apns apple`): then every simulator path answers 404.",
            "content": {
              "application/json": {
                "schema": {
                  "allOf": [
                    {
                      "$ref": "#/components/schemas/ErrorEnvelope"
                    }
                  ],
                  "properties": {
                    "status_code": {
                      "const": 404
                    }
                  }
                }
              }
            }
          },
          "SimulatorMethodNotAllowed": {
            "description": "Wrong HTTP method (`use GET or POST on /simulator/devices`, `use GET on /simulator/devices/<hwid>`).",
            "content": {
              "application/json": {
                "schema": {
                  "allOf": [
                    {
                      "$ref": "#/components/schemas/ErrorEnvelope"
                    }
                  ],
                  "properties": {
                    "status_code": {
                      "const": 405
                    }
                  }
                }
              }
            },
            "headers": {
              "Allow": {
                "description": "`GET, POST` on /simulator/devices, `GET` on /simulator/devices/{hwid}.",
                "required": true,
                "schema": {
                  "type": "string"
                }
              }
            }
          }
        }
      }
    }
    """#
}
