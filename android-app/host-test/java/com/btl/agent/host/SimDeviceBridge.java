/*
 * Host test only: the DeviceBridge the app's native agent talks to, backed
 * by the virtual phone instead of the accessibility service. It does what
 * the service does with the parts that are not Android: gestures go through
 * Gestures (the same checks), and the UI tree is rebuilt as UiNodes and
 * written by UiXml, so the exporter the service uses is what the agent
 * reads.
 */
package com.btl.agent.host;

import com.btl.agent.core.DeviceBridge;
import com.btl.agent.core.Gestures;
import com.btl.agent.core.RgbaFrame;
import com.btl.agent.core.UiNode;
import com.btl.agent.core.UiXml;
import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import javax.xml.parsers.DocumentBuilderFactory;
import org.w3c.dom.Element;
import org.w3c.dom.Node;

final class SimDeviceBridge implements DeviceBridge {
    private final SimPhone phone;
    final List<String> typed = new ArrayList<>();
    final List<String> performed = new ArrayList<>();
    /** An action name ("tap", "swipe", ...) whose call throws, to test failure paths. */
    String failOn = "";

    SimDeviceBridge(SimPhone phone) {
        this.phone = phone;
    }

    @Override
    public String name() {
        return "virtual phone through the app's JNI bridge";
    }

    @Override
    public int screenWidth() {
        return phone.width();
    }

    @Override
    public int screenHeight() {
        return phone.height();
    }

    @Override
    public RgbaFrame screenshot() {
        return new RgbaFrame(phone.width(), phone.height(), phone.screenshotRgba());
    }

    @Override
    public String uiTreeXml() {
        try {
            Element hierarchy = DocumentBuilderFactory.newInstance().newDocumentBuilder()
                    .parse(new ByteArrayInputStream(phone.uiXml().getBytes(StandardCharsets.UTF_8)))
                    .getDocumentElement();
            List<UiNode> windows = new ArrayList<>();
            for (Element e : nodes(hierarchy)) {
                windows.add(toNode(e));
            }
            return UiXml.write(windows, 0);
        } catch (Exception e) {
            throw new IllegalStateException("cannot read the virtual phone's UI tree", e);
        }
    }

    private static List<Element> nodes(Element parent) {
        List<Element> out = new ArrayList<>();
        for (Node c = parent.getFirstChild(); c != null; c = c.getNextSibling()) {
            if (c instanceof Element && ((Element) c).getTagName().equals("node")) {
                out.add((Element) c);
            }
        }
        return out;
    }

    private static UiNode toNode(Element e) {
        UiNode n = new UiNode();
        n.text = e.getAttribute("text");
        n.resourceId = e.getAttribute("resource-id");
        n.className = e.getAttribute("class");
        n.packageName = e.getAttribute("package");
        n.contentDesc = e.getAttribute("content-desc");
        n.checkable = flag(e, "checkable");
        n.checked = flag(e, "checked");
        n.clickable = flag(e, "clickable");
        n.enabled = flag(e, "enabled");
        n.focusable = flag(e, "focusable");
        n.focused = flag(e, "focused");
        n.scrollable = flag(e, "scrollable");
        n.longClickable = flag(e, "long-clickable");
        n.password = flag(e, "password");
        n.selected = flag(e, "selected");
        String[] b = e.getAttribute("bounds").replaceAll("[\\[\\]]", ",").split(",+");
        n.setBounds(Integer.parseInt(b[1]), Integer.parseInt(b[2]), Integer.parseInt(b[3]),
                Integer.parseInt(b[4]));
        for (Element child : nodes(e)) {
            n.add(toNode(child));
        }
        return n;
    }

    private static boolean flag(Element e, String name) {
        return e.getAttribute(name).equals("true");
    }

    private void perform(String action) {
        if (action.equals(failOn)) {
            throw new IllegalStateException("injected failure of " + action);
        }
        performed.add(action);
    }

    @Override
    public void tap(int x, int y) {
        perform("tap");
        Gestures.Stroke s = Gestures.tap(x, y, phone.width(), phone.height());
        phone.touch(s.fromX, s.fromY, s.durationMs);
    }

    @Override
    public void longPress(int x, int y, int holdMs) {
        perform("longPress");
        Gestures.Stroke s = Gestures.longPress(x, y, holdMs, phone.width(), phone.height());
        phone.touch(s.fromX, s.fromY, s.durationMs);
    }

    @Override
    public void swipe(int x1, int y1, int x2, int y2, int durationMs) {
        perform("swipe");
        Gestures.Stroke s = Gestures.swipe(x1, y1, x2, y2, durationMs, phone.width(), phone.height());
        phone.swipe(s.fromX, s.fromY, s.toX, s.toY, s.durationMs);
    }

    @Override
    public void typeText(String text) {
        perform("typeText");
        typed.add(text);
        phone.type(text);
    }

    @Override
    public void back() {
        perform("back");
        phone.back();
    }

    @Override
    public void home() {
        perform("home");
        phone.home();
    }

    @Override
    public void waitMs(int ms) {
        perform("waitMs");
        phone.advance(ms);
    }
}
