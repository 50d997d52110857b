"""Networks of a cell: joining a namespace, link conditions (`conditions.LinkSpec`) and the
shaped path between client and server (`link`)."""
